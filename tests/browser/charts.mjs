// Drives the dashboard's charts in headless Chromium (playwright-core with
// Debian's /usr/bin/chromium) for tests/integration/t0122-dashboard-charts.sh.
//
//   node tests/browser/charts.mjs SCENARIO
//
// The shell script has carried runs through the lifecycle behind `baton
// serve`; each scenario opens a page, checks the SVG the page drew
// (elements, counts, labels), that nothing hostile ran, and saves a
// screenshot. Each check prints "ok - ..." or "not ok - ..."; the exit
// status is 0 when all passed. On a failure the page is saved as
// FAIL-charts-<scenario>.png in BATON_DASH_OUT.
//
// Environment:
//   BATON_DASH_URL, BATON_DASH_TOKEN   the dashboard and its token
//   BATON_DASH_SHOTS   where the screenshots go
//   BATON_DASH_RUN     the run of the run scenarios
//   BATON_DASH_CALLS   the run's agent calls (agent_exited events)
//   BATON_DASH_RUNS    how many runs the store has (page)
//   BATON_DASH_DONE    how many tasks are done (page)
//   BATON_DASH_TITLE   the hostile title (run, page)
//   BATON_CHROMIUM, BATON_PLAYWRIGHT   the browser and playwright-core
//
// Scenarios: run (a run's stages and usage: a fix round, a gate, a quota
// wait), group (a parallel group's members side by side, and hostile
// stage data), page (queue, throughput, usage per day, cost per run).

import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const env = process.env;
const scenario = process.argv[2] || '';
const base = (env.BATON_DASH_URL || '').replace(/\/*$/, '/');
const token = env.BATON_DASH_TOKEN || '';
const outDir = env.BATON_DASH_OUT || process.cwd();
const shots = env.BATON_DASH_SHOTS || outDir;
const WAIT = Number(env.BATON_DASH_WAIT_MS || 30000);

if (!base || !env.BATON_PLAYWRIGHT) {
	console.error('charts.mjs: set BATON_DASH_URL and BATON_PLAYWRIGHT');
	process.exit(2);
}
const { chromium } = await import(pathToFileURL(path.join(env.BATON_PLAYWRIGHT, 'index.mjs')).href);

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
class StepFailed extends Error {}
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

const args = ['--disable-gpu', '--disable-dev-shm-usage', '--no-first-run'];
if (process.getuid && process.getuid() === 0)
	args.push('--no-sandbox');
const browser = await chromium.launch({
	executablePath: env.BATON_CHROMIUM || '/usr/bin/chromium', headless: true, args: args,
});
const context = await browser.newContext({ viewport: { width: 1366, height: 768 } });
const page = await context.newPage();
page.setDefaultTimeout(WAIT);
const pageErrors = [];
page.on('pageerror', (e) => pageErrors.push(String(e && e.message ? e.message : e)));
page.on('console', (m) => {
	if (m.type() === 'error' && !/Failed to load resource/.test(m.text()))
		pageErrors.push('console: ' + m.text());
});
page.on('dialog', (d) => {
	pageErrors.push('unexpected dialog: ' + d.message());
	d.dismiss().catch(() => {});
});
// Anything hostile that runs sets window.__pwned (or opens a dialog).
await page.addInitScript(() => { window.__pwned = undefined; });

async function open(hash) {
	await page.goto(base + '#token=' + encodeURIComponent(token));
	await page.locator('#live[data-state=open]').waitFor();
	await page.goto(base + hash);
}

function shot(name) {
	fs.mkdirSync(shots, { recursive: true });
	return page.screenshot({ path: path.join(shots, name), fullPage: true });
}

// Nothing in the charts came from markup: no element but the page's own
// SVG vocabulary, no event handler attribute, and no script ran.
async function inert(what) {
	const bad = await page.evaluate(() => {
		const allowed = new Set(['svg', 'g', 'rect', 'text', 'title', 'line', 'polyline', 'polygon',
			'circle', 'a', 'p', 'figure', 'figcaption']);
		const out = [];
		for (const el of document.querySelectorAll('.chart *')) {
			if (!allowed.has(el.localName))
				out.push(el.localName);
			for (const a of el.attributes)
				if (/^on/i.test(a.name) || /javascript:/i.test(a.value))
					out.push(el.localName + '[' + a.name + ']');
		}
		for (const svg of document.querySelectorAll('.chart svg svg'))
			out.push('nested svg');
		return out;
	});
	ok(bad.length === 0, what + ': the charts hold only their own elements', bad.join(','));
	await page.waitForTimeout(300);
	ok(await page.evaluate(() => window.__pwned === undefined), what + ': no script ran (window.__pwned unset)');
}

const scenarios = {};

// A feature run with a quota wait, a fix round and a gate: its Stages and
// Cost and tokens charts.
scenarios.run = async () => {
	await open('#/runs/' + encodeURIComponent(env.BATON_DASH_RUN));
	await step('the run page draws its stages', () =>
		page.locator('[data-testid=stages-svg] [data-testid=stage-span]').first().waitFor());
	const spans = await page.$$eval('[data-testid=stage-span]', (gs) => gs.map((g) => ({
		kind: g.dataset.kind, lane: g.dataset.lane, label: g.dataset.label,
		w: Number(g.querySelector('rect').getAttribute('width')),
	})));
	const lanes = await page.$$eval('[data-testid=stage-lane]', (gs) => gs.map((g) => g.dataset.lane));
	const shown = await page.$$eval('[data-testid=stage-lane] text', (ts) => ts.map((t) => t.textContent));
	ok(JSON.stringify(shown) === JSON.stringify(lanes), 'each lane labelled with its name', shown.join(','));
	for (const l of ['planning', 'executing', 'validating', 'reviewing', 'fixing', 'verifying'])
		ok(lanes.includes(l), 'a lane for ' + l, lanes.join(','));
	ok(lanes.includes('waits for people') && lanes.includes('waits for quota'),
		'and lanes for the waits, for people and for quota', lanes.join(','));
	ok(lanes.indexOf('waits for people') > lanes.indexOf('verifying'), 'the waits below the stages');
	const fixes = spans.filter((s) => s.kind === 'fix');
	ok(fixes.length === 1 && fixes[0].label === 'fix 1', 'one fix round, labelled fix 1', JSON.stringify(fixes));
	const reviews = spans.filter((s) => s.lane === 'reviewing');
	ok(reviews.length === 2, 'reviewed twice: before and after the fix', reviews.length);
	const gates = spans.filter((s) => s.kind === 'approval');
	ok(gates.length === 1 && /^gate/.test(gates[0].label), 'one wait at the gate', JSON.stringify(gates));
	const quota = spans.filter((s) => s.kind === 'quota');
	ok(quota.length === 1 && quota[0].label === 'quota: own', 'one quota wait, of provider own', JSON.stringify(quota));
	ok(spans.every((s) => s.w >= 2), 'every span is drawn at least 2 px wide');
	const tip = await page.locator('[data-testid=stage-span][data-kind=fix] title').textContent();
	ok(/^fix 1 \u00b7 \d/.test(tip), 'a span\'s tooltip gives its duration', tip);
	const sum = await page.textContent('#stages-sum');
	ok(/1 fix round/.test(sum) && /waited/.test(sum), 'the summary counts the fix round and the waits', sum);

	await step('the usage chart draws a bar per agent call', () => page.waitForFunction((n) =>
		document.querySelectorAll('[data-testid=usage-bar]').length === n, Number(env.BATON_DASH_CALLS)));
	const withTokens = await page.$$eval('[data-testid=usage-bar]', (bs) => bs.filter((b) => Number(b.dataset.tokens) > 0).length);
	ok(withTokens >= 1, 'the model calls have tokens', withTokens);
	ok(await page.locator('[data-testid=usage-cost-line]').count() === 1, 'and a line of the cost so far');
	const us = await page.textContent('#usage-sum');
	ok(new RegExp('^' + env.BATON_DASH_CALLS + ' calls \u00b7 ').test(us) && /\$0\.\d{4}$/.test(us),
		'the summary: calls, tokens and cost', us);
	ok(await page.locator('#groups-section').isHidden(), 'no group panel for a run without a group');
	ok(await page.textContent('#run-title') === env.BATON_DASH_TITLE, 'the hostile title is the header\'s text');
	await inert('run page');
	await shot('charts-run.png');
	// The page is drawn again as live events come: the charts stay one each.
	ok(await page.locator('[data-testid=stages-svg]').count() === 1, 'one stages chart');
};

// A bug-fix run with a parallel group of three reviews, and an injected
// group with hostile names: members side by side.
scenarios.group = async () => {
	await open('#/runs/' + encodeURIComponent(env.BATON_DASH_RUN));
	await step('the run page shows its parallel groups', () =>
		page.locator('#groups-section:not([hidden]) [data-testid=group-chart]').first().waitFor());
	const figs = await page.$$eval('[data-testid=group-chart]', (fs) => fs.map((f) => ({
		cap: f.querySelector('figcaption').textContent,
		members: [...f.querySelectorAll('[data-testid=group-member]')].map((m) => ({
			stage: m.dataset.stage, status: m.dataset.status,
			x: Number(m.querySelector('rect').getAttribute('x')),
			w: Number(m.querySelector('rect').getAttribute('width')),
			y: Number(m.querySelector('rect').getAttribute('y')),
		})),
	})));
	ok(figs.length === 2, 'two groups: the real one and the injected one', figs.length);
	const real = figs[0];
	ok(/^group 1 \u00b7 3 members$/.test(real.cap), 'the group\'s caption', real.cap);
	ok(JSON.stringify(real.members.map((m) => m.stage)) === '["code-review-1","code-review-2","code-review-3"]',
		'its three members, one row each', JSON.stringify(real.members));
	ok(real.members.every((m) => m.status === 'approved'), 'each with its verdict');
	ok(new Set(real.members.map((m) => m.y)).size === 3, 'side by side, on their own rows');
	const lastStart = Math.max(...real.members.map((m) => m.x));
	const firstEnd = Math.min(...real.members.map((m) => m.x + m.w));
	ok(lastStart < firstEnd, 'overlapping in time', lastStart + ' < ' + firstEnd);
	const slow = real.members.find((m) => m.stage === 'code-review-3');
	ok(real.members.every((m) => m.w <= slow.w + 0.5), 'the slow member the longest bar');
	const hostile = figs[1].members;
	ok(hostile.length === 1 && hostile[0].stage === env.BATON_DASH_STAGE,
		'a hostile stage name is kept as text', JSON.stringify(hostile));
	const labels = await page.$$eval('[data-testid=group-chart] text', (ts) => ts.map((t) => t.textContent));
	ok(labels.some((l) => l.startsWith('<img src=x')), 'and drawn as text', labels.join(' | '));
	const lanes = await page.$$eval('[data-testid=stage-lane] text', (ts) => ts.map((t) => t.textContent));
	ok(lanes.some((l) => l.startsWith('<svg onload')), 'a hostile status is a lane\'s text', lanes.join(' | '));
	ok(/reported no tokens and no cost/.test(await page.textContent('#chart-usage')),
		'a run whose agents report no usage says so', await page.textContent('#chart-usage'));
	ok(/^5 calls \u00b7 0 in \/ 0 out \u00b7 \$0\.0000$/.test(await page.textContent('#usage-sum')),
		'and counts its calls', await page.textContent('#usage-sum'));
	await inert('group run page');
	await shot('charts-group.png');
};

// The charts page: queue depth and throughput over the last hours, the
// usage per day and the cost per run.
scenarios.page = async () => {
	await open('#/charts');
	await step('the charts page opens', () => page.locator('#charts-view').waitFor({ state: 'visible' }));
	await step('the queue chart is drawn', () => page.locator('[data-testid=queue-line]').waitFor({ state: 'attached' }));
	ok(await page.getAttribute('[data-testid=queue-line]', 'data-buckets') === '360',
		'6 hours in 360 one-minute steps');
	const qsum = await page.textContent('#queue-sum');
	ok(new RegExp('^' + env.BATON_DASH_QUEUED + ' queued now').test(qsum), 'the queue now', qsum);
	const settled = await page.$$eval('[data-testid=throughput-bar]', (bs) =>
		bs.reduce((a, b) => a + Number(b.dataset.settled), 0));
	ok(settled === Number(env.BATON_DASH_SETTLED), 'the throughput bars hold every settled task',
		settled + ' vs ' + env.BATON_DASH_SETTLED);
	ok(await page.locator('[data-testid=throughput-started]').count() >= 1, 'and dots for tasks started');
	ok(await page.locator('[data-testid=day-bar]').count() === 14, 'a bar per day, 14 days');
	const today = await page.$$eval('[data-testid=day-bar]', (bs) => bs[bs.length - 1].dataset);
	ok(Number(today.tokens) === Number(env.BATON_DASH_TOKENS), 'today\'s bar: the tokens of every call',
		today.tokens + ' vs ' + env.BATON_DASH_TOKENS);
	ok(Number(today.cost) > 0, 'and their cost', today.cost);
	await step('the cost per run is drawn', () => page.locator('[data-testid=run-bar]').first().waitFor());
	ok(await page.locator('[data-testid=run-bar]').count() === Number(env.BATON_DASH_RUNS),
		'a bar per run', await page.locator('[data-testid=run-bar]').count());
	const tips = await page.$$eval('[data-testid=run-bar] title', (ts) => ts.map((t) => t.textContent));
	ok(tips.some((t) => t.includes(env.BATON_DASH_TITLE.slice(0, 40))), 'a hostile title is a tooltip\'s text',
		tips.join(' | '));
	await inert('charts page');
	await shot('charts-page.png');
	await page.locator('[data-testid=run-bar]').first().click();
	await step('a run\'s bar opens its run page', () => page.locator('#run-view').waitFor({ state: 'visible' }));
	await page.selectOption('#charts-hours', '1').catch(() => {});
	await page.goto(base + '#/charts');
	await page.selectOption('#charts-hours', '1');
	await step('the window can be 1 hour: 60 steps', () => page.waitForFunction(() => {
		const l = document.querySelector('[data-testid=queue-line]');
		return l && l.dataset.buckets === '60';
	}));
	const w = await page.evaluate(() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]);
	ok(w[0] <= w[1], 'no horizontal scrolling', JSON.stringify(w));
};

if (!scenarios[scenario]) {
	console.error('charts.mjs: unknown scenario \'' + scenario + '\' (' + Object.keys(scenarios).join(', ') + ')');
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
		const f = path.join(outDir, 'FAIL-charts-' + scenario + '.png');
		await page.screenshot({ path: f, fullPage: true });
		console.log('# page saved to ' + f + ' at ' + page.url());
	} catch (e) {
		console.log('# could not save the page: ' + e.message);
	}
}
await browser.close();
console.log('# ' + scenario + ': ' + (failures ? failures + ' check(s) failed' : 'all checks passed'));
process.exit(failures ? 1 : 0);
