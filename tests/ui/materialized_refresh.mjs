// Drives the Dagster UI through one refresh of a materialized table: open the table's asset page, read
// its schedule (the humanized cron, the tooltip naming the schedule and its cron, the schedule's own page
// showing it running) and its freshness policy (status and policy text), click "Materialize", follow the
// run to Success (its log names the new snapshot), then open the asset page again and read what the latest
// materialization shows: the freshness status, and the `rows` and `snapshot` metadata. Screenshots go to
// the output folder, their names starting with <round>.
//
//   node materialized_refresh.mjs <dagster url> <asset key path> <output folder> <round>
//
// (the asset key path as the asset's URL has it: tables/<project>/materialized/<name>)
//
// Prints one JSON line {"run_id", "schedule", "freshness_before", "freshness_after", "run_log_line",
// "rows_shown", "snapshot_shown", "screenshots"} and exits 0, or names the failed step and exits 1 (with a
// screenshot of the page at that moment).
import { openFlow } from './browser.mjs';

const [baseUrl, assetPath, outDir, round] = process.argv.slice(2);
if (!baseUrl || !assetPath || !outDir || !round) {
  console.error('usage: node materialized_refresh.mjs <dagster url> <asset key path> <output folder> <round>');
  process.exit(2);
}
const tableName = assetPath.split('/').pop();

const flow = await openFlow(outDir, `${round}-`);
const { page } = flow;

// The freshness statuses the asset page shows (Dagster 1.13's labels of the freshness states). The page
// shows the status twice: under "Status" and in the "Freshness policy" section beside the definition.
const FRESHNESS_STATUS = /^(Passing|Warning|Failed|Not evaluated|No data|None set)$/;
const FRESHNESS_POLICY = /^(Fails|Warns) if more than .+ since last materialization$/;

async function openAssetPage() {
  await page.goto(`${baseUrl}/assets/${assetPath}`);
  await page.getByRole('button', { name: 'Materialize' }).waitFor({ timeout: 60_000 });
  await page.getByText('Automation details').waitFor({ timeout: 60_000 });
  await page.getByText(FRESHNESS_POLICY).first().waitFor({ timeout: 60_000 });
  await page.getByText(FRESHNESS_STATUS).first().waitFor({ timeout: 60_000 });
}

async function freshnessShown() {
  const statuses = [...new Set(await page.getByText(FRESHNESS_STATUS).allTextContents())];
  if (statuses.length !== 1) throw new Error(`the page shows freshness statuses ${statuses.join(', ')}`);
  return { status: statuses[0], policy: (await page.getByText(FRESHNESS_POLICY).first().textContent()).trim() };
}

// The value the metadata table shows for a key (the latest materialization's, on a freshly loaded page).
async function metadataShown(key) {
  const row = page.locator('tr').filter({ has: page.getByText(key, { exact: true }) }).first();
  await row.waitFor({ timeout: 60_000 });
  return (await row.locator('td').last().textContent()).trim();
}

await flow.run(async () => {
  flow.step = 'open the asset page';
  await openAssetPage();
  const freshnessBefore = await freshnessShown();
  await flow.shoot('1-asset-page');

  flow.step = "read the asset's schedule";
  // The schedule as the "Automation details" section lists it: a link labelled with the humanized cron.
  const scheduleLink = page.locator('a[href*="/schedules/"]').first();
  await scheduleLink.waitFor({ timeout: 30_000 });
  const schedule = {
    label: (await scheduleLink.textContent()).trim(),
    href: await scheduleLink.getAttribute('href'),
  };
  await scheduleLink.hover();  // its tooltip names the schedule and shows the cron
  const tooltip = page.getByText(/^Name:/).first();
  await tooltip.waitFor({ timeout: 30_000 });
  schedule.tooltip = (await tooltip.locator('xpath=..').innerText()).replace(/\s+/g, ' ').trim();
  await flow.shoot('2-schedule-tooltip');

  flow.step = "open the schedule's page";
  await scheduleLink.click();
  await page.waitForURL(/\/schedules\//, { timeout: 30_000 });
  await page.getByText('Next tick').waitFor({ timeout: 60_000 });
  const running = page.getByRole('row').filter({ hasText: 'Running' }).getByRole('checkbox');
  await running.waitFor({ state: 'attached', timeout: 30_000 });
  schedule.running = await running.isChecked();
  schedule.page_cron = (await page.getByRole('row').filter({ hasText: /^Schedule/ }).innerText())
    .replace(/\s+/g, ' ').trim();
  schedule.target = (await page.getByRole('row').filter({ hasText: /^Target/ }).innerText())
    .replace(/\s+/g, ' ').trim();
  await flow.shoot('3-schedule-page');

  flow.step = 'launch a materialization from the asset page';
  await openAssetPage();
  await page.getByRole('button', { name: 'Materialize' }).click();
  // The toast "Launched run <id>" links to the run.
  const runLink = page.locator('a[href*="/runs/"]').filter({ hasText: /view/i }).first();
  await runLink.waitFor({ timeout: 60_000 });
  await runLink.click();
  await page.waitForURL(/\/runs\/[0-9a-f-]{36}/, { timeout: 30_000 });
  const runId = page.url().match(/\/runs\/([0-9a-f-]{36})/)[1];

  flow.step = 'follow the run to Success';
  await page.getByText('Success', { exact: true }).first().waitFor({ timeout: 240_000 });
  await page.getByText('No steps have errored').waitFor({ timeout: 30_000 }).catch(() => {});
  // The run's log line naming the snapshot it made current.
  await page.getByPlaceholder(/^Filter/).first().fill('is current');
  const logRow = page.getByText(new RegExp(`materialized\\.${tableName}: snapshot \\S+ is current`)).first();
  await logRow.waitFor({ timeout: 60_000 });
  const runLogLine = (await logRow.textContent()).trim();
  await flow.shoot('4-run-succeeded');

  flow.step = 'see the fresh materialization on the asset page';
  // The freshness daemon evaluates the policy after the materialization: reload until it says "Passing".
  await openAssetPage();
  for (let attempt = 0; (await freshnessShown()).status !== 'Passing'; attempt++) {
    if (attempt === 24) throw new Error(`freshness still ${(await freshnessShown()).status} after 24 reloads`);
    await page.waitForTimeout(5_000);
    await openAssetPage();
  }
  const freshnessAfter = await freshnessShown();
  const rowsShown = await metadataShown('rows');
  const snapshotShown = await metadataShown('snapshot');
  await flow.shoot('5-asset-materialized');

  return {
    run_id: runId, schedule, freshness_before: freshnessBefore, freshness_after: freshnessAfter,
    run_log_line: runLogLine, rows_shown: rowsShown, snapshot_shown: snapshotShown,
  };
});
