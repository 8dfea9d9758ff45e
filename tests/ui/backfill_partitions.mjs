// Launches a backfill of a range of time partitions from an asset's page in the Dagster UI, as a user does:
// "Materialize…", confirming the assets the dagger's query materializes with it, the range typed into the
// partition selection ([from...to]), "Launch backfill"; then follows the toast's "View" link to the
// backfill's page and waits until it shows the backfill completed.
//
//   node backfill_partitions.mjs <dagster url> <asset key path> <from> <to> <output folder>
//
// (the asset key path as the asset's URL has it: daily_orders/sql)
//
// Prints one JSON line {"backfill_id", "partitions_shown", "screenshots"} and exits 0, or names the failed
// step and exits 1 (with a screenshot of the page at that moment).
import { openFlow } from './browser.mjs';

const [baseUrl, assetPath, from, to, outDir] = process.argv.slice(2);
if (!baseUrl || !assetPath || !from || !to || !outDir) {
  console.error('usage: node backfill_partitions.mjs <dagster url> <asset key path> <from> <to> <output folder>');
  process.exit(2);
}
const flow = await openFlow(outDir);
const { page } = flow;

await flow.run(async () => {
  flow.step = 'open the asset page';
  await page.goto(`${baseUrl}/assets/${assetPath}`);
  const materialize = page.getByRole('button', { name: /Materialize/ }).first();
  await materialize.waitFor({ timeout: 120_000 });
  await flow.shoot('1-asset-page');

  flow.step = 'open the launch dialog';
  await materialize.click();
  // One query computes every stage of a dagger: the UI asks to confirm the stages materialized with it.
  await page.getByRole('dialog').getByRole('button', { name: 'Confirm' }).click();
  const dialog = page.getByRole('dialog');
  await dialog.getByText('Partition selection').waitFor({ timeout: 60_000 });

  flow.step = 'select the range of partitions';
  const range = dialog.getByPlaceholder('No matching partitions');
  await range.fill(`[${from}...${to}]`);
  await range.press('Enter');
  const partitionsShown = (await dialog.getByText(/^\d+ partitions?$/).first().textContent()).trim();
  await flow.shoot('2-range-selected');

  flow.step = 'launch the backfill';
  await dialog.getByRole('button', { name: 'Launch backfill' }).click();
  const created = page.getByText(/^Created backfill \w+$/).first();
  await created.waitFor({ timeout: 60_000 });
  const backfillId = (await created.textContent()).trim().split(' ').pop();

  flow.step = "open the backfill's page";
  await page.getByRole('link', { name: 'View' }).first().click();
  await page.waitForURL(new RegExp(backfillId), { timeout: 60_000 });
  await flow.shoot('3-backfill-running');

  flow.step = 'see the backfill completed';
  // The page polls the backfill: each asset's row reaches "100% completed" (three bounded runs take
  // minutes on a busy machine); then the tag beside "Status" says how it ended.
  await page.waitForFunction(() => {
    const progress = document.body.innerText.match(/\d+% completed/g);
    return progress !== null && progress.every((shown) => shown === '100% completed');
  }, null, { timeout: 900_000, polling: 2000 });
  const ended = /^(Succeeded|Completed|Failed|Canceled)$/;
  const statusTag = page.locator('xpath=(//*[normalize-space(text())="Status"])[1]/following::*')
    .filter({ hasText: ended }).first();
  const status = (await statusTag.textContent()).trim();
  await flow.shoot('4-backfill-completed');
  if (!['Succeeded', 'Completed'].includes(status)) throw new Error(`the backfill's page shows ${status}`);

  return { backfill_id: backfillId, partitions_shown: partitionsShown };
});
