// Drives the dashboard's chat panel in headless Chromium (playwright-core
// with Debian's /usr/bin/chromium) for tests/integration/t0130-chat-dashboard.sh.
//
//   node tests/browser/chat.mjs
//
// A new conversation from the panel; a message whose answer (the scripted
// planner's) is hostile markup that must stay text; a message whose answer
// is a plan: the reply streams into the panel, the marker is not shown,
// the mode buttons appear (GitHub disabled, no forge) and Direct queues
// the tasks; the conversation reaches monitoring. Each check prints
// "ok - ..." or "not ok - ..."; the exit status is 0 when all passed.
//
// Environment: BATON_DASH_URL, BATON_DASH_TOKEN, BATON_DASH_SHOTS,
// BATON_DASH_OUT, BATON_CHROMIUM, BATON_PLAYWRIGHT; BATON_CHAT_MODE, the
// file the scripted planner reads its answer's kind from.

import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const env = process.env;
const base = (env.BATON_DASH_URL || '').replace(/\/*$/, '/');
const token = env.BATON_DASH_TOKEN || '';
const outDir = env.BATON_DASH_OUT || process.cwd();
const shots = env.BATON_DASH_SHOTS || outDir;
const modeFile = env.BATON_CHAT_MODE || '';
const WAIT = 30000;

if (!base || !env.BATON_PLAYWRIGHT || !modeFile) {
	console.error('chat.mjs: set BATON_DASH_URL, BATON_PLAYWRIGHT and BATON_CHAT_MODE');
	process.exit(2);
}
const { chromium } = await import(pathToFileURL(path.join(env.BATON_PLAYWRIGHT, 'index.mjs')).href);

let failures = 0;
function ok(cond, what, detail) {
	if (cond)
		console.log('ok - ' + what);
	else {
		failures++;
		console.log('not ok - ' + what + (detail !== undefined ? ': ' + detail : ''));
	}
	return !!cond;
}
async function step(what, fn) {
	try {
		const v = await fn();
		ok(true, what);
		return v;
	} catch (e) {
		ok(false, what, String(e && e.message ? e.message.split('\n')[0] : e));
		throw e;
	}
}

const args = ['--disable-gpu', '--disable-dev-shm-usage', '--no-first-run'];
if (process.getuid && process.getuid() === 0)
	args.push('--no-sandbox');
const browser = await chromium.launch({
	executablePath: env.BATON_CHROMIUM || '/usr/bin/chromium', headless: true, args: args,
});
const page = await (await browser.newContext({ viewport: { width: 1280, height: 900 } })).newPage();
page.setDefaultTimeout(WAIT);
const pageErrors = [];
page.on('pageerror', (e) => pageErrors.push(String(e && e.message ? e.message : e)));
page.on('dialog', (d) => {
	pageErrors.push('unexpected dialog: ' + d.message());
	d.dismiss().catch(() => {});
});
await page.addInitScript(() => { window.__pwned = undefined; });

async function say(text, kind) {
	fs.writeFileSync(modeFile, kind + '\n');
	await page.fill('[data-testid=chat-input]', text);
	await page.click('[data-testid=chat-send]');
}

try {
	await page.goto(base + '#token=' + encodeURIComponent(token));
	await page.locator('#live[data-state=open]').waitFor();
	await page.click('[data-testid=nav-chat]');
	await step('a new conversation opens with the greeting', async () => {
		await page.locator('[data-testid=chat-message][data-role=assistant]').first().waitFor();
		const id = await page.textContent('[data-testid=chat-id]');
		if (!/^\d+$/.test(id))
			throw new Error('no id: ' + id);
	});
	ok((await page.textContent('[data-testid=chat-phase]')) === 'greeting', 'phase greeting');

	await say('make it pretty', 'hostile');
	await step('the hostile answer arrives', () =>
		page.locator('[data-testid=chat-message]', { hasText: 'onerror' }).waitFor());
	await page.waitForTimeout(500);
	ok(await page.evaluate(() => window.__pwned === undefined), 'the hostile answer ran no script');
	ok(await page.evaluate(() => document.querySelectorAll('#chat-log img, #chat-log script').length === 0),
		'the hostile answer added no elements');
	ok((await page.textContent('[data-testid=chat-phase]')) === 'requirement_gathering', 'phase requirement_gathering');

	await say('JSON, two steps', 'plan');
	await step('the plan arrives with the mode buttons', () =>
		page.locator('[data-testid=chat-modes]').waitFor());
	ok((await page.textContent('[data-testid=chat-phase]')) === 'plan_proposal', 'phase plan_proposal');
	ok(!(await page.textContent('[data-testid=chat-log]')).includes('PLAN_READY'), 'the marker is not shown');
	ok(await page.isDisabled('[data-testid=chat-mode-github]'), 'GitHub is disabled without a forge');
	ok(!(await page.isDisabled('[data-testid=chat-mode-direct]')), 'Direct is enabled');
	fs.mkdirSync(shots, { recursive: true });
	await page.screenshot({ path: path.join(shots, 'chat-plan.png'), fullPage: true });

	await page.click('[data-testid=chat-mode-direct]');
	await step('Direct queues the tasks: monitoring', () =>
		page.waitForFunction(() => document.getElementById('chat-phase').textContent === 'monitoring'));
	ok((await page.textContent('[data-testid=chat-log]')).includes('Queued 2 tasks'), 'the queued tasks are listed');
	ok(await page.isDisabled('[data-testid=chat-input]'), 'no more messages once the tasks are queued');
	await page.screenshot({ path: path.join(shots, 'chat-monitoring.png'), fullPage: true });
} catch (e) {
	ok(false, 'the scenario ran to its end', e && e.stack ? e.stack.split('\n')[0] : String(e));
}
ok(pageErrors.length === 0, 'no script errors on the page', pageErrors.join(' | '));
if (failures)
	await page.screenshot({ path: path.join(outDir, 'FAIL-chat.png'), fullPage: true }).catch(() => {});
await browser.close();
process.exit(failures ? 1 : 0);
