// What the UI drivers share: Debian's Chromium (never a downloaded one) on a fresh profile, kept off the
// (closed) network, with Dagster's community dialog kept out of the way.
import { mkdtempSync } from 'node:fs';
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
