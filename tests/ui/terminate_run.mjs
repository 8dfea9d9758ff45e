// Terminates one run from its page in the Dagster UI, as a user does: the Terminate button, then the
// dialog's confirmation; then waits until the page shows the run ended as a success (a graceful stop).
//
//   node terminate_run.mjs <dagster url> <run id> <output folder>
//
// Prints one JSON line {"run_id", "screenshots"} and exits 0, or names the failed step and exits 1 (with a
// screenshot of the page at that moment).
import { openFlow } from './browser.mjs';

const [baseUrl, runId, outDir] = process.argv.slice(2);
if (!baseUrl || !runId || !outDir) {
  console.error('usage: node terminate_run.mjs <dagster url> <run id> <output folder>');
  process.exit(2);
}
const flow = await openFlow(outDir);
const { page } = flow;

await flow.run(async () => {
  flow.step = 'open the run in progress';
  await page.goto(`${baseUrl}/runs/${runId}`);
  await page.getByText('Started', { exact: true }).first().waitFor({ timeout: 120_000 });
  await flow.shoot('1-run-in-progress');

  flow.step = 'terminate the run';
  await page.getByRole('button', { name: 'Terminate' }).first().click();
  await page.getByRole('dialog').getByRole('button', { name: /Terminate/ }).click();

  flow.step = 'see the run ended as a success';
  await page.getByText('Success', { exact: true }).first().waitFor({ timeout: 120_000 });
  await page.getByText('No steps have errored').waitFor({ timeout: 30_000 });
  await flow.shoot('2-run-stopped');

  return { run_id: runId };
});
