// Drives the baton dashboard in headless Chromium (playwright-core with
// Debian's /usr/bin/chromium) for tests/integration/t0025-dashboard.sh.
//
//   node tests/browser/dashboard.mjs SCENARIO
//
// One scenario per call; the shell script has set up the repositories
// and `baton serve`. Each check prints "ok - ..." or "not ok - ...";
// the exit status is 0 when all passed. On a failure the page is saved
// as FAIL-<scenario>.png in BATON_DASH_OUT (or the current directory)
// and its text is printed.
//
// Environment:
//   BATON_DASH_URL     the dashboard, e.g. http://127.0.0.1:PORT/
//   BATON_DASH_TOKEN   the bearer token (.baton/token)
//   BATON_DASH_GO      directory where the test agent waits for go-* files
//   BATON_DASH_SHOTS   where `screens` saves its PNGs
//   BATON_DASH_TITLE   the task a scenario looks for (live, diff, approve)
//   BATON_DASH_XSS     the hostile title (xss)
//   BATON_DASH_REPO    the repository, for `$BATON task add` (live)
//   BATON_DASH_RUN     a run: finished (errors, screens) or running (controls)
//   BATON_DASH_QUEUED  how many tasks are queued (paging)
//   BATON_DASH_CHANGE  a change line the drift scenario expects
//   BATON_DASH_RESEARCH, BATON_DASH_ASSIST  the runs of the facts scenario
//   BATON_CHROMIUM     the browser (default /usr/bin/chromium)
//   BATON_PLAYWRIGHT   playwright-core's directory
//
// Scenarios: login, live, diff, xss, errors, screens, approve, paging,
// controls, drift, facts, forge, who.

import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const env = process.env;
const scenario = process.argv[2] || '';
const base = (env.BATON_DASH_URL || '').replace(/\/*$/, '/');
const token = env.BATON_DASH_TOKEN || '';
const outDir = env.BATON_DASH_OUT || process.cwd();
const pwDir = env.BATON_PLAYWRIGHT;
const WAIT = Number(env.BATON_DASH_WAIT_MS || 30000);

if (!base || !pwDir) {
	console.error('dashboard.mjs: set BATON_DASH_URL and BATON_PLAYWRIGHT');
	process.exit(2);
}
const { chromium } = await import(pathToFileURL(path.join(pwDir, 'index.mjs')).href);

let failures = 0;
function ok(cond, what, detail) {
	if (cond) {
		console.log('ok - ' + what);
	} else {
		failures++;
		console.log('not ok - ' + what + (detail !== undefined ? ': ' + detail : ''));
	}
	return !!cond;
}

// Like ok(), for a promise that must resolve (a wait).
async function step(what, fn) {
	try {
		const v = await fn();
		ok(true, what);
		return v;
	} catch (e) {
		ok(false, what, String(e && e.message ? e.message.split('\n')[0] : e));
		throw new StepFailed(what);
	}
}
class StepFailed extends Error {}

const args = ['--disable-gpu', '--disable-dev-shm-usage', '--no-first-run'];
if (process.getuid && process.getuid() === 0)
	args.push('--no-sandbox');
const browser = await chromium.launch({
	executablePath: env.BATON_CHROMIUM || '/usr/bin/chromium',
	headless: true,
	args: args,
});
const context = await browser.newContext({ viewport: { width: 1366, height: 768 } });
const page = await context.newPage();
page.setDefaultTimeout(WAIT);
const pageErrors = [];
page.on('pageerror', (e) => pageErrors.push(String(e && e.message ? e.message : e)));
// (a refused request logs "Failed to load resource": the login and error
// scenarios cause those on purpose)
page.on('console', (m) => {
	if (m.type() === 'error' && !/Failed to load resource/.test(m.text()))
		pageErrors.push('console: ' + m.text());
});
// A dialog would hang a test; the page should never open one.
page.on('dialog', (d) => {
	pageErrors.push('unexpected dialog: ' + d.message());
	d.dismiss().catch(() => {});
});

const card = (title) => page.locator('[data-testid=task-card]').filter({
	has: page.locator('[data-testid=task-title]', { hasText: title }),
});
const cardIn = (status, title) => page.locator('#col-' + status + ' [data-testid=task-card]').filter({
	has: page.locator('[data-testid=task-title]', { hasText: title }),
});

async function openBoard() {
	await page.goto(base + '#token=' + encodeURIComponent(token));
	await page.locator('#board-view').waitFor({ state: 'visible' });
	await page.locator('#live[data-state=open]').waitFor();
}

function touch(name) {
	fs.writeFileSync(path.join(env.BATON_DASH_GO, name), '');
}

// The page must not have scrolled sideways.
async function noSideScroll(what) {
	const w = await page.evaluate(() => ({
		scroll: document.documentElement.scrollWidth,
		client: document.documentElement.clientWidth,
	}));
	ok(w.scroll <= w.client, what + ': no horizontal scrolling', JSON.stringify(w));
}

/* --- scenarios ------------------------------------------------------------ */

const scenarios = {};

// No token: the form. A wrong token: the form again, with a message. The
// right one: the board; #token=... leaves the URL.
scenarios.login = async () => {
	await page.goto(base);
	await step('without a token the page asks for one', () =>
		page.locator('#login-form').waitFor({ state: 'visible' }));
	await page.fill('#token-input', 'not-the-token');
	await page.click('#login-submit');
	await step('a wrong token brings the form back with a message', () =>
		page.locator('#login-msg:not([hidden])').waitFor());
	const msg = await page.textContent('#login-msg');
	ok(/401|refused|token/i.test(msg), 'the message says the token was refused', msg);
	await page.fill('#token-input', token);
	await page.click('#login-submit');
	await step('the right token opens the board', () =>
		page.locator('#board-view').waitFor({ state: 'visible' }));
	await step('the live stream connects', () => page.locator('#live[data-state=open]').waitFor());
	await page.goto(base + '#token=' + encodeURIComponent(token));
	await page.locator('#board-view').waitFor({ state: 'visible' });
	ok(!/token/.test(page.url()), 'the token is taken out of the URL', page.url());
	await page.reload();
	await step('the token is kept for the session (a reload stays signed in)', () =>
		page.locator('#board-view').waitFor({ state: 'visible' }));
	const stored = await page.evaluate(() => sessionStorage.getItem('baton.token'));
	ok(stored === token, 'the token is in sessionStorage');
	// An empty title is refused by the form itself.
	await page.fill('#add-title', '');
	await page.click('#add-submit');
	await step('adding a task without a title shows an error', () =>
		page.locator('#add-msg.error:not([hidden])').waitFor());
};

// A task added from the form appears queued (a worker is busy with the
// "hold" task), then moves to running and to done, without a reload.
scenarios.live = async () => {
	const title = env.BATON_DASH_TITLE;
	await openBoard();
	await page.evaluate(() => { window.__sameDocument = 1; });
	await step('the busy task shows as running', () => cardIn('running', 'WAIT-hold').waitFor());
	const before = Number((await page.textContent('#count-queued')).replace(/[^0-9]/g, ''));
	await page.fill('#add-title', title);
	await page.fill('#add-priority', '3');
	await page.fill('#add-body', 'Added from the dashboard test.');
	await page.click('#add-submit');
	await step('the form confirms the task was added', () =>
		page.locator('#add-msg.ok:not([hidden])').waitFor());
	await step('the new task appears in the queued column', () => cardIn('queued', title).waitFor());
	ok((await page.inputValue('#add-title')) === '', 'the form is cleared');
	await step('the queued count goes up', () => page.waitForFunction((n) =>
		Number(document.getElementById('count-queued').textContent.replace(/[^0-9]/g, '')) > n, before));
	// A task added elsewhere (the CLI) shows up too, from the stream.
	if (env.BATON_DASH_REPO) {
		const cli = 'Added with the CLI while the board is open';
		execFileSync(env.BATON, ['task', 'add', cli], { cwd: env.BATON_DASH_REPO, stdio: 'ignore' });
		await step('a task added with the CLI appears on the board live', () => cardIn('queued', cli).waitFor());
	}
	touch('go-hold');
	await step('the busy task moves to done', () => cardIn('done', 'WAIT-hold').waitFor());
	await step('the new task moves to running', () => cardIn('running', title).waitFor());
	ok(await cardIn('queued', title).count() === 0, 'and left the queued column');
	touch('go-slow');
	await step('the new task moves to done', () => cardIn('done', title).waitFor());
	ok(await card(title).count() === 1, 'exactly one card for the task');
	const same = await page.evaluate(() => window.__sameDocument === 1);
	ok(same, 'all of it without reloading the page');
	const linked = await cardIn('done', title).getAttribute('data-run');
	ok(!!linked, 'the done card links to its run', linked);
	await noSideScroll('board');
};

// The finished run's page shows the diff with the agent's added line.
scenarios.diff = async () => {
	const title = env.BATON_DASH_TITLE;
	await openBoard();
	await cardIn('done', title).waitFor();
	await cardIn('done', title).click();
	await step('clicking the card opens the run page', () =>
		page.locator('#run-view').waitFor({ state: 'visible' }));
	ok(/#\/runs\//.test(page.url()), 'the URL names the run', page.url());
	await step('the header shows the task title', () => page.waitForFunction((t) =>
		document.getElementById('run-title').textContent === t, title));
	await step('the status is merge_ready', () => page.waitForFunction(() =>
		document.getElementById('run-status').textContent === 'merge_ready'));
	const facts = await page.textContent('#run-facts');
	ok(/pipeline/.test(facts) && /quick/.test(facts), 'the header names the pipeline', facts);
	ok(/tokens in \/ out/.test(facts) && /cost/.test(facts), 'the header shows usage', facts);
	const visible = await page.$$eval('#run-actions button', (bs) => bs.filter((b) => !b.hidden).map((b) => b.id));
	ok(visible.join(',') === 'btn-rewind', 'a finished run offers only a rewind', visible.join(','));
	await step('the diff shows the added line in green', () =>
		page.locator('#diff span.add', { hasText: 'dashboard line from' }).first().waitFor());
	const stat = await page.textContent('#diff-stat');
	ok(/\+[1-9]/.test(stat), 'the diff summary counts added lines', stat);
	const col = await page.locator('#diff span.add').first().evaluate((e) => getComputedStyle(e).backgroundColor);
	ok(col !== 'rgba(0, 0, 0, 0)', 'added lines are coloured', col);
	await step('the timeline lists the run\'s transitions', () =>
		page.locator('#timeline li.t-transition').first().waitFor());
	await step('the artifacts are listed', () =>
		page.locator('#artifacts [data-testid=artifact-link]').first().waitFor());
	await page.locator('#artifacts [data-testid=artifact-link]').first().click();
	await step('an artifact opens as text', () => page.waitForFunction(() => {
		const t = document.getElementById('artifact-text').textContent;
		return t.length > 0 && !/^loading/.test(t) && !/^cannot load/.test(t);
	}));
	await step('the run\'s stored files are listed', () =>
		page.locator('#files [data-testid=file-link]').first().waitFor());
	await page.locator('#files [data-testid=file-link]', { hasText: '.prompt.md' }).first().click();
	await step('a stored file opens as text', () => page.waitForFunction(() => {
		const t = document.getElementById('artifact-text').textContent;
		return t.length > 0 && !/^loading/.test(t) && !/^cannot load/.test(t);
	}));
	await step('the reports section is there', () => page.locator('#reports > *').first().waitFor());
	await noSideScroll('run page');
	await page.click('#nav-board');
	await step('the brand link leads back to the board', () =>
		page.locator('#board-view').waitFor({ state: 'visible' }));
};

// A hostile title and hostile agent output show as text and run nothing.
scenarios.xss = async () => {
	const payload = env.BATON_DASH_XSS;
	await page.addInitScript(() => { window.__pwned = undefined; });
	await openBoard();
	const c = page.locator('[data-testid=task-card]').filter({
		has: page.locator('[data-testid=task-title]', { hasText: payload }),
	});
	await step('the card with the hostile title is on the board', () => c.first().waitFor());
	const text = await c.first().locator('[data-testid=task-title]').textContent();
	ok(text === payload, 'the title is shown as the literal text', text);
	ok(await page.locator('#board img').count() === 0, 'no <img> element was made from it');
	await page.waitForTimeout(300);
	ok(await page.evaluate(() => window.__pwned === undefined), 'window.__pwned is not set');
	await c.first().waitFor();
	const run = await c.first().getAttribute('data-run');
	if (ok(!!run, 'the hostile task has a run')) {
		await c.first().click();
		await step('its run page shows the title as text', () => page.waitForFunction((t) =>
			document.getElementById('run-title').textContent === t, payload));
		await step('the agent\'s hostile output shows as text', () => page.waitForFunction(() =>
			document.getElementById('output').textContent.includes('<b>bold</b>') ||
			document.getElementById('diff').textContent.includes('<b>bold</b>')));
		await page.waitForTimeout(300);
		ok(await page.locator('#run-view img, #run-view b, #run-view script').count() === 0,
			'no element was made from the agent\'s output');
		ok(await page.evaluate(() => window.__pwned === undefined), 'window.__pwned is still not set');
	}
	// The add form with a hostile title: the same.
	await page.click('#nav-board');
	await page.locator('#board-view').waitFor({ state: 'visible' });
	const payload2 = '<svg onload=window.__pwned=3>form</svg>';
	await page.fill('#add-title', payload2);
	await page.click('#add-submit');
	await step('a hostile title added from the form shows as text', () =>
		card(payload2).first().waitFor());
	ok(await page.locator('#board svg').count() === 0, 'no <svg> element was made from it');
	ok(await page.evaluate(() => window.__pwned === undefined), 'window.__pwned is still not set');
};

// A run at a gate: the board shows it blocked (awaiting approval); its run
// page shows waiting_for_approval and the gate controls; approve lets it
// finish.
scenarios.approve = async () => {
	const title = env.BATON_DASH_TITLE;
	await openBoard();
	await step('the gated task is in the blocked column', () => cardIn('blocked', title).waitFor());
	const why = await cardIn('blocked', title).locator('[data-testid=block-reason]').textContent();
	ok(/awaiting_approval/.test(why), 'the card shows the block reason', why);
	await cardIn('blocked', title).click();
	await step('its run page says waiting_for_approval', () => page.waitForFunction(() =>
		document.getElementById('run-status').textContent === 'waiting_for_approval'));
	const shown = await page.$$eval('#run-actions button', (bs) => bs.filter((b) => !b.hidden).map((b) => b.id));
	ok(shown.includes('btn-approve') && shown.includes('btn-reject') && shown.includes('btn-changes'),
		'approve, reject and request changes are offered', shown.join(','));
	ok(!shown.includes('btn-pause') && !shown.includes('btn-resume'), 'pause and resume are not', shown.join(','));
	// Request changes wants guidance: an empty one is refused on the page.
	await page.click('#btn-changes');
	await step('request changes asks for guidance', () => page.locator('#ask-form').waitFor({ state: 'visible' }));
	await page.click('#ask-submit');
	await step('and refuses to send none', () => page.locator('#run-msg.error:not([hidden])').waitFor());
	await page.click('#ask-cancel');
	// Steering goes to the server; a failure would show its JSON message.
	await page.click('#btn-approve');
	await step('approve is accepted', () => page.locator('#run-msg.ok:not([hidden])').waitFor());
	await step('the run goes on and ends merge_ready', () => page.waitForFunction(() =>
		document.getElementById('run-status').textContent === 'merge_ready', null, { timeout: 60000 }));
	await step('the timeline shows the decision', () => page.waitForFunction(() =>
		/approv/i.test(document.getElementById('timeline').textContent)));
	const after = await page.$$eval('#run-actions button', (bs) => bs.filter((b) => !b.hidden).map((b) => b.id));
	ok(after.join(',') === 'btn-rewind', 'the gate controls are gone; a rewind is offered', after.join(','));
	// Deciding again is refused, and the page shows the server's message.
	const res = await page.evaluate(async (tok) => {
		const m = /#\/runs\/(.*)$/.exec(location.hash);
		const r = await fetch('/api/v1/approvals/' + m[1], {
			method: 'POST', headers: { Authorization: 'Bearer ' + tok, 'Content-Type': 'application/json' },
			body: '{"decision":"approve"}',
		});
		return { status: r.status, body: await r.json() };
	}, token);
	ok(res.status === 409 && res.body.error && res.body.error.code === 'illegal_transition',
		'a second decision is 409 illegal_transition', JSON.stringify(res));
	await page.click('#nav-board');
	await step('on the board the task is done', () => cardIn('done', title).waitFor());
};

// Who decided: a run an operator's token steered and approved shows the
// token's name on those timeline entries (t0150-roles.sh); the page is
// opened with a viewer's token, which reads everything.
scenarios.who = async () => {
	const run = env.BATON_DASH_RUN, who = env.BATON_DASH_WHO;
	await openBoard();
	await page.goto(base + '#/runs/' + encodeURIComponent(run));
	await step('the run page opens', () => page.waitForFunction((r) =>
		document.getElementById('run-id') && document.getElementById('run-id').textContent.includes(r), run));
	await step('the timeline names who decided', () => page.waitForFunction((w) =>
		[...document.querySelectorAll('[data-testid=timeline-actor]')].some((n) => n.textContent === ' by ' + w), who));
	const n = await page.$$eval('[data-testid=timeline-actor]', (ns) => ns.length);
	ok(n >= 2, 'the steer and the decision both carry it', String(n));
};

// Error messages of the API reach the page: pausing a finished run.
scenarios.errors = async () => {
	const run = env.BATON_DASH_RUN;
	await openBoard();
	await page.goto(base + '#/runs/' + encodeURIComponent(run));
	await page.locator('#run-view').waitFor({ state: 'visible' });
	await page.waitForFunction(() => document.getElementById('run-status').textContent !== '');
	// The page hides the controls of a finished run; show one to press it.
	await page.evaluate(() => { document.getElementById('btn-pause').hidden = false; });
	await page.click('#btn-pause');
	await step('a refused action shows the API\'s error message', () =>
		page.locator('#run-msg.error:not([hidden])').waitFor());
	const msg = await page.textContent('#run-msg');
	ok(/illegal_transition/.test(msg), 'with its code', msg);
	await page.goto(base + '#/runs/r99999');
	await step('an unknown run says so', () => page.waitForFunction(() =>
		/not_found|no run/.test(document.getElementById('run-msg').textContent)));
};

// 250 queued tasks: the queued column loads 100, "show more" adds 100 and
// then the last 50, and the button goes away.
scenarios.paging = async () => {
	const total = Number(env.BATON_DASH_QUEUED);
	await openBoard();
	await step('the queued count is the total', () => page.waitForFunction((n) =>
		document.getElementById('count-queued').textContent.replace(/[^0-9]/g, '') === String(n), total));
	const n = () => page.locator('#col-queued [data-testid=task-card]').count();
	await step('the queued column shows the first 100', () => page.waitForFunction(() =>
		document.querySelectorAll('#col-queued .card').length === 100));
	const ids = await page.$$eval('#col-queued .card', (cs) => cs.map((c) => Number(c.dataset.id)));
	ok(ids.every((v, i) => i === 0 || ids[i - 1] > v), 'newest first');
	ok(await page.locator('#more-queued').isVisible(), 'with a "show more" button');
	await page.click('#more-queued');
	await step('show more adds the next 100', () => page.waitForFunction(() =>
		document.querySelectorAll('#col-queued .card').length === 200));
	await page.click('#more-queued');
	await step('and then the rest', () => page.waitForFunction((t) =>
		document.querySelectorAll('#col-queued .card').length === t, total - 0));
	const all = await page.$$eval('#col-queued .card', (cs) => cs.map((c) => Number(c.dataset.id)));
	ok(new Set(all).size === all.length, 'no card twice', all.length + ' cards');
	ok(all.every((v, i) => i === 0 || all[i - 1] > v), 'still newest first');
	await step('the button goes away at the end', () => page.locator('#more-queued').waitFor({ state: 'hidden' }));
	ok(await n() === total, 'every queued task is on the board once');
};

// A running run's controls: steer (with a text), pause, then resume (the
// pause not yet taken), and abort (a second click confirms); the aborted
// run offers a rewind, which names the stages when given an unknown one.
scenarios.controls = async () => {
	const run = env.BATON_DASH_RUN;
	await openBoard();
	await page.goto(base + '#/runs/' + encodeURIComponent(run));
	await step('the run page shows a running run', () => page.waitForFunction(() =>
		document.getElementById('run-status').textContent === 'executing'));
	const shown = async () => page.$$eval('#run-actions button', (bs) => bs.filter((b) => !b.hidden).map((b) => b.id).sort().join(','));
	ok(await shown() === 'btn-abort,btn-pause,btn-steer', 'pause, steer and abort are offered', await shown());
	await step('the agent\'s output is there', () => page.waitForFunction(() =>
		/still waiting for go-page/.test(document.getElementById('output').textContent)));
	const len0 = (await page.textContent('#output')).length;
	await step('and grows live, as the agent writes', () => page.waitForFunction((n) =>
		document.getElementById('output').textContent.length > n + 60, len0));
	await step('the output box follows the end', () => page.waitForFunction(() => {
		const o = document.getElementById('output');
		return o.scrollHeight <= o.clientHeight || o.scrollTop + o.clientHeight >= o.scrollHeight - 4;
	}));
	await page.click('#btn-steer');
	await page.fill('#ask-text', 'keep the <b>public</b> API unchanged');
	await page.click('#ask-submit');
	await step('steer is accepted', () => page.locator('#run-msg.ok:not([hidden])').waitFor());
	await step('the ask form closes', () => page.locator('#ask-form').waitFor({ state: 'hidden' }));
	await step('the timeline shows the steer event, as text', () => page.waitForFunction(() =>
		/keep the <b>public<\/b> API unchanged/.test(document.getElementById('timeline').textContent)));
	await page.click('#btn-pause');
	await step('pause is accepted and resume is offered', () => page.locator('#btn-resume:not([hidden])').waitFor());
	ok(await page.locator('#btn-pause').isHidden(), 'pause is no longer offered');
	await page.click('#btn-resume');
	await step('resume takes the pause back', () => page.locator('#btn-pause:not([hidden])').waitFor());
	await page.click('#btn-abort');
	ok((await page.textContent('#btn-abort')) === 'Confirm abort', 'abort asks for a second click');
	await page.click('#btn-abort');
	await step('abort ends the run', () => page.waitForFunction(() =>
		document.getElementById('run-status').textContent === 'aborted', null, { timeout: 60000 }));
	ok(await shown() === 'btn-rewind', 'an aborted run offers only a rewind', await shown());
	await page.click('#btn-rewind');
	await page.fill('#ask-text', 'deploy');
	await page.click('#ask-submit');
	await step('a stage the pipeline lacks is refused, naming its stages', () => page.waitForFunction(() =>
		/has no stage 'deploy': its stages are [a-z]+ \([a-z_]+\)/.test(document.getElementById('run-msg').textContent)));
	ok(await page.locator('#ask-form').isVisible(), 'the ask form stays open to try again');
	await page.click('#ask-cancel');
};

// A paused run whose config changed since it started: Resume is refused
// (409 config_drift), the page lists the changes as text with the three
// answers, and "original config" resumes it for a worker to finish.
scenarios.drift = async () => {
	const run = env.BATON_DASH_RUN;
	await openBoard();
	await page.goto(base + '#/runs/' + encodeURIComponent(run));
	await step('the run page shows the paused run', () => page.waitForFunction(() =>
		document.getElementById('run-status').textContent === 'paused'));
	ok(await page.locator('#drift').isHidden(), 'no drift answers before a resume');
	await page.click('#btn-resume');
	await step('resume is refused with what changed', () => page.locator('#drift:not([hidden])').waitFor());
	const lines = await page.$$eval('#drift-changes li', (ls) => ls.map((l) => l.textContent));
	ok(lines.includes(env.BATON_DASH_CHANGE), 'the change, one line each', lines.join(' | '));
	ok(await page.$$eval('#drift-changes li *', (es) => es.length) === 0, 'as text');
	const answers = await page.$$eval('#drift button', (bs) => bs.filter((b) => !b.hidden).map((b) => b.id).sort().join(','));
	ok(answers === 'btn-drift-current,btn-drift-fresh,btn-drift-snapshot', 'three answers are offered', answers);
	ok(/config changed/.test(await page.textContent('#run-msg')), 'the message says why');
	await page.click('#btn-drift-fresh');
	ok((await page.textContent('#btn-drift-fresh')) === 'Confirm start fresh', 'start fresh asks for a second click');
	await page.click('#btn-drift-snapshot');
	await step('the original config is taken and the answers go', () => page.locator('#drift').waitFor({ state: 'hidden' }));
	ok(/done/.test(await page.textContent('#run-msg.ok')), 'the resume is done');
	await step('and a worker finishes the run', () => page.waitForFunction(() =>
		document.getElementById('run-status').textContent === 'merge_ready', null, { timeout: 60000 }));
};

// A research run's Claims panel (a row per claim, the round and the
// judge, the report), and an assist run waiting for feedback: its state
// (the pipeline's own name for the status) and its question as facts.
scenarios.facts = async () => {
	await openBoard();
	await page.goto(base + '#/runs/' + encodeURIComponent(env.BATON_DASH_RESEARCH));
	await step('the research run shows its claims', () =>
		page.locator('#claims-section:not([hidden]) [data-testid=claim]').first().waitFor());
	const rows = await page.$$eval('[data-testid=claim]', (rs) =>
		rs.map((r) => [...r.children].map((c) => c.textContent)));
	const want = [['c1', 'supported', '0.80', '2'], ['c2', 'supported', '0.80', '2'], ['c3', 'supported', '0.80', '2']];
	ok(JSON.stringify(rows.map((r) => r.slice(0, 4))) === JSON.stringify(want),
		'a row per claim: id, status, confidence, evidence', JSON.stringify(rows));
	ok(rows.every((r) => r[4] !== ''), 'with the claim\'s text');
	ok(await page.textContent('#claims-round') === 'round 1 \u00b7 judge: pass', 'the round and the judge',
		await page.textContent('#claims-round'));
	await step('the report is shown', () => page.waitForFunction(() =>
		/^# Report/.test(document.getElementById('research-report').textContent)));
	ok(await page.locator('#fact-question').count() === 0, 'a finished run asks nothing');

	await page.goto(base + '#/runs/' + encodeURIComponent(env.BATON_DASH_ASSIST));
	await step('the assist run waits for feedback', () => page.waitForFunction(() =>
		document.getElementById('run-status').textContent === 'waiting_for_approval'));
	const fact = (id) => page.textContent('[data-testid=' + id + ']');
	ok(await fact('fact-state') === 'awaiting_feedback', 'its state is the pipeline\'s name', await fact('fact-state'));
	ok(/^feedback: /.test(await fact('fact-question')), 'its question, with its kind', await fact('fact-question'));
	ok(await page.locator('#claims-section').isHidden(), 'no Claims panel outside research');
};

// The forge on the board and the run page (t0072): a card with its
// issue and PR links and the PR's check state, a hostile URL shown as
// text, and on the PR's run page the pull request and its reaction
// rounds on the timeline. BATON_DASH_TITLE: the task with the PR;
// BATON_DASH_RUN: its run; BATON_DASH_XSS: the task whose issue URL is
// javascript:; BATON_DASH_SHOTS: where forge-board.png goes.
scenarios.forge = async () => {
	await openBoard();
	const c = card(env.BATON_DASH_TITLE);
	await step('the linked card shows its forge line', () =>
		c.locator('[data-testid=card-forge]').waitFor());
	const issue = c.locator('[data-testid=forge-issue]');
	const pr = c.locator('[data-testid=forge-pr]');
	const checks = c.locator('[data-testid=forge-checks]');
	ok(await issue.textContent() === 'issue #12', 'the issue as issue #12', await issue.textContent());
	ok(await issue.getAttribute('href') === 'https://github.com/acme/app/issues/12', 'linked to the issue',
		await issue.getAttribute('href'));
	ok(await pr.textContent() === 'PR #34', 'the PR as PR #34', await pr.textContent());
	ok(await pr.getAttribute('href') === 'https://github.com/acme/app/pull/34', 'linked to the PR');
	ok(await pr.getAttribute('rel') === 'noopener noreferrer', 'a link out opens no door back');
	ok(await checks.textContent() === 'failure', 'the PR\'s checks: failure', await checks.textContent());
	ok(/\bck-failure\b/.test(await checks.getAttribute('class')), 'styled as a failure');
	const plain = card('Plain task');
	await plain.waitFor();
	ok(await plain.locator('[data-testid=card-forge]').count() === 0, 'a task without a link has no forge line');
	const bad = card(env.BATON_DASH_XSS);
	await bad.locator('[data-testid=forge-issue]').waitFor();
	ok(await bad.locator('a').count() === 0, 'a javascript: URL is no link',
		await bad.evaluate((n) => n.outerHTML.slice(0, 300)));
	ok(await bad.locator('[data-testid=forge-issue]').textContent() === 'issue #13', 'its issue shown as text');
	if (env.BATON_DASH_SHOTS) {
		fs.mkdirSync(env.BATON_DASH_SHOTS, { recursive: true });
		await page.screenshot({ path: path.join(env.BATON_DASH_SHOTS, 'forge-board.png') });
	}

	await page.goto(base + '#/runs/' + encodeURIComponent(env.BATON_DASH_RUN));
	await step('the run page shows the pull request', () =>
		page.locator('[data-testid=fact-forge] [data-testid=forge-pr]').waitFor());
	await step('and its reaction round on the timeline', () =>
		page.locator('[data-testid=timeline-round]').first().waitFor());
	const rounds = await page.$$eval('[data-testid=timeline-round]', (rs) => rs.map((r) => r.textContent));
	ok(rounds.length === 1 && /reaction round 1/.test(rounds[0]) && /PR #34: task #2 /.test(rounds[0]),
		'one round: PR #34, task #2', JSON.stringify(rounds));
	ok(await page.locator('[data-testid=fact-forge]').count() === 1, 'the fact is there once');
	if (env.BATON_DASH_SHOTS)
		await page.screenshot({ path: path.join(env.BATON_DASH_SHOTS, 'forge-run.png') });
};

// Screenshots of the board and of a run page, at 1366x768.
scenarios.screens = async () => {
	const dir = env.BATON_DASH_SHOTS;
	fs.mkdirSync(dir, { recursive: true });
	await openBoard();
	await page.locator('[data-testid=task-card]').first().waitFor();
	await page.waitForTimeout(500);
	await page.screenshot({ path: path.join(dir, 'board.png') });
	ok(fs.statSync(path.join(dir, 'board.png')).size > 1000, 'board.png saved');
	await noSideScroll('board');
	await page.goto(base + '#/runs/' + encodeURIComponent(env.BATON_DASH_RUN));
	await page.locator('#run-view').waitFor({ state: 'visible' });
	await page.locator('#diff span').first().waitFor();
	await page.locator('#timeline li').first().waitFor();
	await page.waitForTimeout(500);
	await page.screenshot({ path: path.join(dir, 'run.png') });
	ok(fs.statSync(path.join(dir, 'run.png')).size > 1000, 'run.png saved');
	await page.screenshot({ path: path.join(dir, 'run-full.png'), fullPage: true });
	await noSideScroll('run page');
};

/* --- main ----------------------------------------------------------------- */

if (!scenarios[scenario]) {
	console.error('dashboard.mjs: unknown scenario \'' + scenario + '\' (' + Object.keys(scenarios).join(', ') + ')');
	await browser.close();
	process.exit(2);
}
try {
	await scenarios[scenario]();
} catch (e) {
	if (!(e instanceof StepFailed))
		ok(false, 'scenario ' + scenario + ' ran to its end', e && e.stack ? e.stack : String(e));
}
ok(pageErrors.length === 0, 'no script errors on the page', pageErrors.join(' | '));
if (failures) {
	try {
		const f = path.join(outDir, 'FAIL-' + scenario + '.png');
		await page.screenshot({ path: f, fullPage: true });
		console.log('# page saved to ' + f + ' at ' + page.url());
		const txt = await page.evaluate(() => document.body.innerText);
		console.log(txt.split('\n').slice(0, 80).map((l) => '# | ' + l).join('\n'));
	} catch (e) {
		console.log('# could not save the page: ' + e.message);
	}
}
await browser.close();
console.log('# ' + scenario + ': ' + (failures ? failures + ' check(s) failed' : 'all checks passed'));
process.exit(failures ? 1 : 0);
