// bench/dashboard_10k.mjs: the dashboard in headless Chromium against a
// `baton serve` holding 10,000 tasks (bench/dashboard_10k.sh sets it up).
// Prints figures; asserts nothing about time.
//
//   BATON_DASH_URL, BATON_DASH_TOKEN   the dashboard and its token
//   BATON_PLAYWRIGHT                   playwright-core's directory
//   BATON_CHROMIUM                     the browser (default /usr/bin/chromium)
//   BENCH_DASH_ROUNDS                  page loads to measure (default 3)
//
// Per page load (a fresh browser context each time, 1366x768):
//   first render   navigation start to the first card on the board
//   idle           navigation start to the end of the last request or
//                  long task, once nothing happened for 1 s
//   longest task   the longest main-thread task (PerformanceObserver
//                  "longtask": only tasks over 50 ms are reported; none
//                  means every task was shorter)
//   JS heap        used JS heap after a garbage collection (CDP)
//   DOM            elements on the page
// Then, on the last page: adding a task from the form until its card is
// on the board, and "show more" on the queued column until 100 more cards
// are there.

import path from 'node:path';
import { pathToFileURL } from 'node:url';

const env = process.env;
const base = (env.BATON_DASH_URL || '').replace(/\/*$/, '/');
const token = env.BATON_DASH_TOKEN || '';
const rounds = Number(env.BENCH_DASH_ROUNDS || 3);
if (!base || !env.BATON_PLAYWRIGHT) {
	console.error('dashboard_10k.mjs: set BATON_DASH_URL and BATON_PLAYWRIGHT');
	process.exit(2);
}
const { chromium } = await import(pathToFileURL(path.join(env.BATON_PLAYWRIGHT, 'index.mjs')).href);

const args = ['--disable-gpu', '--disable-dev-shm-usage', '--no-first-run'];
if (process.getuid && process.getuid() === 0)
	args.push('--no-sandbox');
const browser = await chromium.launch({
	executablePath: env.BATON_CHROMIUM || '/usr/bin/chromium', headless: true, args: args,
});

// Installed before the page's own script: watches long tasks, requests
// (but not the endless event stream) and the first card.
function probe() {
	window.__bench = { longest: 0, longtasks: 0, last: 0, firstCard: 0, api: 0 };
	const b = window.__bench;
	try {
		new PerformanceObserver((list) => {
			for (const e of list.getEntries()) {
				b.longtasks++;
				b.longest = Math.max(b.longest, e.duration);
				b.last = Math.max(b.last, e.startTime + e.duration);
			}
		}).observe({ type: 'longtask', buffered: true });
	} catch (e) { b.noLongtask = String(e); }
	new PerformanceObserver((list) => {
		for (const e of list.getEntries()) {
			if (!/\/api\/v1\/events/.test(e.name))
				b.last = Math.max(b.last, e.responseEnd);
			if (/\/api\/v1\/tasks\?/.test(e.name))
				b.api = Math.max(b.api, e.duration);
		}
	}).observe({ type: 'resource', buffered: true });
	const look = () => {
		if (document.querySelector('.card')) {
			b.firstCard = performance.now();
			b.last = Math.max(b.last, b.firstCard);
		} else {
			requestAnimationFrame(look);
		}
	};
	requestAnimationFrame(look);
}

function ms(x) {
	return Math.round(x) + ' ms';
}

const results = [];
let page, cdp, context;
for (let i = 0; i < rounds; i++) {
	if (context)
		await context.close();
	context = await browser.newContext({ viewport: { width: 1366, height: 768 } });
	page = await context.newPage();
	page.setDefaultTimeout(60000);
	await page.addInitScript(probe);
	cdp = await context.newCDPSession(page);
	await page.goto(base + '#token=' + encodeURIComponent(token));
	await page.waitForFunction(() => window.__bench && window.__bench.firstCard > 0);
	// idle: nothing for 1 s
	await page.waitForFunction(() => performance.now() - window.__bench.last > 1000, null, { polling: 100 });
	await cdp.send('HeapProfiler.collectGarbage');
	const heap = await cdp.send('Runtime.getHeapUsage');
	const r = await page.evaluate(() => ({
		firstCard: window.__bench.firstCard,
		idle: window.__bench.last,
		longest: window.__bench.longest,
		longtasks: window.__bench.longtasks,
		api: window.__bench.api,
		noLongtask: window.__bench.noLongtask || '',
		dom: document.getElementsByTagName('*').length,
		cards: document.querySelectorAll('.card').length,
		queued: document.getElementById('count-queued').textContent,
		counts: Array.from(document.querySelectorAll('.column')).map((c) =>
			c.dataset.status + ' ' + c.querySelector('.count').textContent +
			' (' + c.querySelectorAll('.card').length + ' shown)').join(', '),
	}));
	r.heap = heap.usedSize;
	results.push(r);
	console.log('load ' + (i + 1) + ': first render ' + ms(r.firstCard) + ', idle ' + ms(r.idle) +
		', longest task ' + (r.longtasks ? ms(r.longest) + ' (' + r.longtasks + ' over 50 ms)' : 'under 50 ms') +
		', JS heap ' + (r.heap / 1048576).toFixed(1) + ' MiB, ' + r.dom + ' elements, ' + r.cards + ' cards');
	if (r.noLongtask)
		console.log('  (no longtask observer: ' + r.noLongtask + ')');
}
console.log('board: ' + results[results.length - 1].counts);

// Adding a task from the form, until its card is on the board.
const title = 'bench: added from the form ' + Date.now();
await page.fill('#add-title', title);
const t0 = await page.evaluate(() => performance.now());
await page.click('#add-submit');
const t1 = await page.waitForFunction((t) => {
	for (const e of document.querySelectorAll('#col-queued .card .title'))
		if (e.textContent === t)
			return performance.now();
	return false;
}, title, { polling: 'raf' });
const addMs = (await t1.jsonValue()) - t0;
console.log('add a task from the form until its card shows: ' + ms(addMs));

// Show more on the queued column.
const before = await page.locator('#col-queued .card').count();
const t2 = await page.evaluate(() => performance.now());
await page.click('#more-queued');
const t3 = await page.waitForFunction((n) => {
	return document.querySelectorAll('#col-queued .card').length >= n + 100 ? performance.now() : false;
}, before, { polling: 'raf' });
const moreMs = (await t3.jsonValue()) - t2;
const lt = await page.evaluate(() => window.__bench.longest);
console.log('show more (queued, ' + before + ' -> ' + (await page.locator('#col-queued .card').count()) +
	' cards): ' + ms(moreMs) + '; longest task so far ' + (lt ? ms(lt) : 'under 50 ms'));

const med = (k) => {
	const v = results.map((r) => r[k]).sort((a, b) => a - b);
	return v[Math.floor(v.length / 2)];
};
const longest = Math.max(...results.map((r) => r.longest));
console.log('median of ' + rounds + ' loads: first render ' + ms(med('firstCard')) + ', idle ' + ms(med('idle')) +
	', JS heap ' + (med('heap') / 1048576).toFixed(1) + ' MiB; longest task of all loads ' +
	(longest ? ms(longest) : 'under 50 ms') + '; slowest task-list request ' + ms(Math.max(...results.map((r) => r.api))));
console.log('JSON ' + JSON.stringify({ loads: results.map((r) => ({
	first_render_ms: Math.round(r.firstCard), idle_ms: Math.round(r.idle), longest_task_ms: Math.round(r.longest),
	longtasks: r.longtasks, slowest_list_ms: Math.round(r.api), heap_bytes: r.heap, elements: r.dom, cards: r.cards,
})), add_task_ms: Math.round(addMs), show_more_ms: Math.round(moreMs) }));
await browser.close();
