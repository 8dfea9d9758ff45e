// What the UI drivers share: Debian's Chromium (never a downloaded one) on a fresh profile, kept off the
// (closed) network, with Dagster's community dialog kept out of the way; and how a driver reports (one JSON
// line with its screenshots, or the step that failed with a screenshot of that moment).
import { mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

export async function launchBrowser() {
  const context = await chromium.launchPersistentContext(mkdtempSync(join(tmpdir(), 'chromium-')), {
    executablePath: '/usr/bin/chromium',
    headless: true,
    viewport: { width: 1400, height: 900 },
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
           '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  // On localhost Dagster opens a "Join the Dagster community" dialog a second after load, at any point of
  // the flow, and its backdrop swallows clicks. The browser remembers a dismissal in localStorage, so a
  // fresh profile says it was dismissed; should the key ever change, `skipCommunityDialog`'s handler
  // clicks "Skip" before any action the dialog would block.
  await context.addInitScript(() => window.localStorage.setItem('communityNux', '"1"'));
  const page = context.pages()[0] ?? (await context.newPage());
  await skipCommunityDialog(page);
  return { context, page };
}

export async function skipCommunityDialog(onPage) {
  await onPage.addLocatorHandler(onPage.getByRole('button', { name: 'Skip', exact: true }), (skip) => skip.click());
}

// A driver's browser and its report. `flow.step` names what the driver is doing; `flow.shoot(name)` keeps a
// screenshot in `outDir` (names start with `prefix`); `flow.run(body)` prints the object `body` returns, with
// the screenshots, as one JSON line, or the failed step (and a screenshot of the page then) with exit code 1.
export async function openFlow(outDir, prefix = '') {
  mkdirSync(outDir, { recursive: true });
  const { context, page } = await launchBrowser();
  const screenshots = [];
  const flow = {
    context,
    page,
    step: 'start',
    async shoot(name, onPage = page) {
      const path = join(outDir, `${prefix}${name}.png`);
      await onPage.screenshot({ path });
      screenshots.push(path);
    },
    async run(body) {
      try {
        console.log(JSON.stringify({ ...(await body()), screenshots }));
      } catch (error) {
        await flow.shoot('failure').catch(() => {});
        console.error(`UI step failed: ${flow.step}: ${error.message}`);
        process.exitCode = 1;
      } finally {
        await context.close();
      }
    },
  };
  return flow;
}
