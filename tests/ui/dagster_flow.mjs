// Drives the Dagster UI through a dagger's life: open its asset graph, launch a materialization, watch the
// run in progress, see its live health check fail while it runs, terminate it, and see it stopped (a
// success saying where it stopped, no error); then, given a job and a run config, launch that job from its
// launchpad with that config (a rewind, say) and see the run succeed. Screenshots go to the output folder.
//
//   node dagster_flow.mjs <dagster url> <asset group> <output folder> <failing check> [<job> <run config>]
//
// Prints one JSON line {"run_id", "launched_run_id", "first_log_line", "stopped_line", "screenshots"} and
// exits 0, or names the failed step and exits 1 (with a screenshot of the page at that moment).
import { openFlow, skipCommunityDialog } from './browser.mjs';

const [baseUrl, group, outDir, failingCheck, job, runConfig] = process.argv.slice(2);
if (!baseUrl || !group || !outDir || !failingCheck || (job && !runConfig)) {
  console.error(
    'usage: node dagster_flow.mjs <dagster url> <asset group> <output folder> <failing check> [<job> <run config>]',
  );
  process.exit(2);
}
const flow = await openFlow(outDir);
const { context, page } = flow;

await flow.run(async () => {
  flow.step = 'open the asset graph';
  // The group's own graph (the code location of workspace.yaml, `dagger_assets`): the global lineage shows
  // groups collapsed once there are several (the external sources are a group of their own).
  await page.goto(`${baseUrl}/locations/__repository__@dagger_assets/asset-groups/${group}`);
  await page.getByRole('button', { name: 'Materialize all' }).waitFor({ timeout: 60_000 });
  await page.getByText('sql', { exact: true }).first().waitFor();
  await page.getByText('Loading...').first().waitFor({ state: 'hidden', timeout: 30_000 });
  await flow.shoot('1-asset-graph');

  flow.step = 'launch a materialization';
  await page.getByRole('button', { name: 'Materialize all' }).click();
  const runLink = page.locator('a[href*="/runs/"]').filter({ hasText: /view/i }).first();
  await runLink.waitFor({ timeout: 60_000 });
  await runLink.click();
  await page.waitForURL(/\/runs\/[0-9a-f-]{36}/, { timeout: 30_000 });
  const runId = page.url().match(/\/runs\/([0-9a-f-]{36})/)[1];

  flow.step = 'see the run in progress';
  await page.getByText('Started', { exact: true }).first().waitFor({ timeout: 120_000 });
  await page.getByText(/micro-batch|batch \d+ \|/).first().waitFor({ timeout: 120_000 });
  // The log sink's first row as the page shows it (its float and timestamp formatting are checked).
  const firstRow = page.getByText(/^batch 0 \| \{/).first();
  await firstRow.waitFor({ timeout: 120_000 });
  const firstLogLine = (await firstRow.textContent()).trim();
  await flow.shoot('2-run-in-progress');

  flow.step = 'see the live check fail while the run goes on';
  const checks = await context.newPage();
  await skipCommunityDialog(checks);
  await checks.goto(`${baseUrl}/assets/${group}/sql?view=checks&checkDetail=${failingCheck}`);
  await checks.getByText('Execution history').first().waitFor({ timeout: 60_000 });
  // Only this check in the list (others may fail too, before the first batch), and its detail beside it.
  const onlyThisCheck = async () => {
    await checks.getByPlaceholder('Filter checks').fill(failingCheck);
    await checks.getByText('Evaluation result').first().waitFor({ timeout: 30_000 });
  };
  await onlyThisCheck();
  const failed = checks.getByText('Failed', { exact: true }).first();
  for (let attempt = 0; !(await failed.isVisible()); attempt++) {
    if (attempt === 12) throw new Error(`check ${failingCheck} not shown as failed after 12 reloads`);
    await checks.waitForTimeout(10_000);  // the run records live evaluations every checks.live_interval
    await checks.reload();
    await onlyThisCheck();
  }
  await flow.shoot('3-live-check-failed', checks);
  await checks.close();

  flow.step = 'terminate the run';
  await page.getByRole('button', { name: 'Terminate' }).first().click();
  await page.getByRole('dialog').getByRole('button', { name: /Terminate/ }).click();

  flow.step = 'see the run stopped: a success that says where, no error';
  await page.getByText('Success', { exact: true }).first().waitFor({ timeout: 120_000 });
  await page.getByText('No steps have errored').waitFor({ timeout: 30_000 });
  // The log shows its latest events; the filter brings back the line that says where the run stopped.
  await page.getByPlaceholder(/^Filter/).first().fill('stopped after batch');
  const stoppedRow = page.getByText(/stopped after batch \d+, checkpoint at /).first();
  await stoppedRow.waitFor({ timeout: 60_000 });
  const stoppedLine = (await stoppedRow.textContent()).trim();
  if ((await page.getByText('DagsterExecutionInterruptedError').count()) > 0) {
    throw new Error('the stopped run shows an interrupt error');
  }
  await flow.shoot('4-run-stopped');

  let launchedRunId = null;
  if (job) {
    flow.step = 'write the run config in the launchpad';
    await page.goto(`${baseUrl}/locations/__repository__@dagger_assets/jobs/${job}/playground`);
    const editor = page.locator('.CodeMirror').first();
    await editor.waitFor({ timeout: 60_000 });
    await editor.click();
    await page.keyboard.press('Control+A');
    await page.keyboard.press('Delete');
    // One line of flow-style YAML: typed line by line, the editor would add its own indentation.
    await page.keyboard.insertText(runConfig);
    await page.getByText('Loading...').first().waitFor({ state: 'hidden', timeout: 30_000 });
    await flow.shoot('5-launchpad');

    flow.step = 'launch the run from the launchpad';
    await page.getByRole('button', { name: 'Launch Run' }).click();
    await page.waitForURL(/\/runs\/[0-9a-f-]{36}/, { timeout: 60_000 });
    launchedRunId = page.url().match(/\/runs\/([0-9a-f-]{36})/)[1];

    flow.step = 'see the launched run succeed';
    await page.getByText('Success', { exact: true }).first().waitFor({ timeout: 240_000 });
    await flow.shoot('6-launched-run-succeeded');
  }

  return {
    run_id: runId, launched_run_id: launchedRunId, first_log_line: firstLogLine, stopped_line: stoppedLine,
  };
});
