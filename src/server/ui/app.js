/*
 * The baton dashboard: a board of tasks by status, kept live by the event
 * stream, a page per run (header, controls, charts of its stages, usage
 * and parallel groups, timeline, agent output, artifacts, the run's
 * stored files, diff, reports), and a page of charts of the queue and
 * the usage per day (inline SVG drawn here, no library). It reads the REST
 * API of docs/api.md with the bearer token of the repository and follows
 * GET /api/v1/events with an EventSource (which resumes by itself with
 * Last-Event-ID).
 *
 * Rules this file keeps:
 *   - whatever comes from the API (titles, agent output, artifacts, diffs,
 *     reasons) enters the page as text: textContent and text nodes, never
 *     markup (no HTML parsing of data anywhere in this file);
 *   - the board never renders everything: each column loads one page
 *     (newest first) and grows by "show more"; a live message marks its
 *     task dirty, and dirty tasks are re-read in one debounced batch.
 */
'use strict';
(function () {

const API = '/api/v1';
const STATUSES = ['queued', 'running', 'blocked', 'done', 'failed', 'cancelled'];
const PAGE = 100;
const TERMINAL_RUN = new Set(['merge_ready', 'completed', 'blocked', 'failed', 'aborted']);
const STREAM_TYPES = ['task:started', 'task:progress', 'task:delta', 'task:completed',
	'task:error', 'task:stopped', 'approval:requested', 'approval:decided', 'event'];
const REPORT_PARTS = ['changed', 'blockers', 'next', 'budget', 'evidence'];
const OUTPUT_MAX = 400000;	/* characters of agent output kept on the page */
const DIFF_MAX_LINES = 20000;
const TIMELINE_MAX = 2000;
const DIRTY_BATCH_MAX = 40;	/* more dirty tasks than this: reload the columns */

const $ = (id) => document.getElementById(id);

/* --- small helpers ------------------------------------------------------ */

/*
 * h('li', {class: 'card', dataset: {id: 3}}, 'text', node, ...): an element.
 * Strings and numbers become text nodes; 'text' sets textContent. Nothing
 * is ever parsed as HTML.
 */
function h(tag, props, ...kids) {
	const n = document.createElement(tag);
	if (props) {
		for (const k of Object.keys(props)) {
			const v = props[k];
			if (v === null || v === undefined || v === false)
				continue;
			if (k === 'class')
				n.className = v;
			else if (k === 'text')
				n.textContent = String(v);
			else if (k === 'dataset')
				for (const d of Object.keys(v))
					n.dataset[d] = String(v[d]);
			else if (k.startsWith('on'))
				n.addEventListener(k.slice(2), v);
			else
				n.setAttribute(k, String(v));
		}
	}
	add(n, kids);
	return n;
}

function add(n, kid) {
	if (kid === null || kid === undefined || kid === false)
		return;
	if (Array.isArray(kid))
		for (const k of kid)
			add(n, k);
	else if (kid instanceof Node)
		n.appendChild(kid);
	else
		n.appendChild(document.createTextNode(String(kid)));
}

function show(el, on) {
	el.hidden = !on;
}

function pad(n) {
	return n < 10 ? '0' + n : String(n);
}

/* A Date from epoch milliseconds, epoch seconds or an ISO 8601 string. */
function toDate(v) {
	if (v === null || v === undefined || v === '')
		return null;
	let d;
	if (typeof v === 'number')
		d = new Date(v < 1e11 ? v * 1000 : v);
	else
		d = new Date(v);
	return isNaN(d.getTime()) ? null : d;
}

function fmtTime(v) {
	const d = toDate(v);
	if (!d)
		return '';
	const now = new Date();
	const hms = pad(d.getHours()) + ':' + pad(d.getMinutes()) + ':' + pad(d.getSeconds());
	if (d.toDateString() === now.toDateString())
		return hms;
	return d.getFullYear() + '-' + pad(d.getMonth() + 1) + '-' + pad(d.getDate()) + ' ' + hms;
}

function fmtClock(v) {
	const d = toDate(v);
	return d ? pad(d.getHours()) + ':' + pad(d.getMinutes()) + ':' + pad(d.getSeconds()) : '';
}

function fmtAge(v) {
	const d = toDate(v);
	if (!d)
		return '';
	const s = Math.max(0, Math.round((Date.now() - d.getTime()) / 1000));
	if (s < 60)
		return s + 's ago';
	if (s < 3600)
		return Math.floor(s / 60) + 'm ago';
	if (s < 86400)
		return Math.floor(s / 3600) + 'h ago';
	return Math.floor(s / 86400) + 'd ago';
}

function fmtDuration(ms) {
	if (typeof ms !== 'number' || !isFinite(ms) || ms < 0)
		return '';
	const s = Math.round(ms / 1000);
	if (s < 60)
		return s + 's';
	if (s < 3600)
		return Math.floor(s / 60) + 'm ' + pad(s % 60) + 's';
	return Math.floor(s / 3600) + 'h ' + pad(Math.floor(s / 60) % 60) + 'm';
}

function fmtInt(n) {
	return typeof n === 'number' ? n.toLocaleString('en-US') : '';
}

function fmtCost(c) {
	if (typeof c !== 'number')
		return '';
	return '$' + (c < 1 ? c.toFixed(4) : c.toFixed(2));
}

function fmtSize(n) {
	if (typeof n !== 'number')
		return '';
	if (n < 1024)
		return n + ' B';
	if (n < 1048576)
		return (n / 1024).toFixed(1) + ' KiB';
	return (n / 1048576).toFixed(1) + ' MiB';
}

/* Short text for any JSON value (event data, report parts). */
function brief(v, max) {
	let s;
	if (v === null || v === undefined)
		return '';
	if (typeof v === 'string')
		s = v;
	else {
		try {
			s = JSON.stringify(v);
		} catch (e) {
			s = String(v);
		}
	}
	max = max || 300;
	return s.length > max ? s.slice(0, max - 1) + '\u2026' : s;
}

/* An event's data as an object, whether the API sent it parsed or as text. */
function dataOf(ev) {
	let d = ev ? ev.data : null;
	if (typeof d === 'string') {
		try {
			d = JSON.parse(d);
		} catch (e) {
			return { text: d };
		}
	}
	return d && typeof d === 'object' ? d : {};
}

function asId(v) {
	if (typeof v === 'number' && isFinite(v))
		return v;
	if (typeof v === 'string' && /^[0-9]+$/.test(v))
		return Number(v);
	return null;
}

/* The task a stream message is about, or null. */
function taskIdOf(m) {
	let id = asId(m.task);
	if (id === null)
		id = asId(m.task_id);
	if (id === null && m.event) {
		id = asId(m.event.task);
		if (id === null)
			id = asId(m.event.task_id);
		if (id === null)
			id = asId(dataOf(m.event).task);
	}
	return id;
}

function runIdOf(m) {
	if (typeof m.run === 'string' && m.run)
		return m.run;
	if (m.event && typeof m.event.run === 'string' && m.event.run)
		return m.event.run;
	return null;
}

/* --- the API ------------------------------------------------------------ */

class ApiError extends Error {
	constructor(status, code, message, detail) {
		super(message);
		this.status = status;
		this.code = code;
		this.detail = detail || null; /* the whole error object */
	}
}

let token = '';
let started = false;

/*
 * One API call. opts: method, json (a body to send as JSON), text (answer
 * as text). Resolves with the answer; rejects with an ApiError carrying the
 * JSON error's code and message. A 401 also brings the token form back.
 */
async function api(path, opts) {
	opts = opts || {};
	const headers = { Authorization: 'Bearer ' + token };
	let body;
	if (opts.json !== undefined) {
		headers['Content-Type'] = 'application/json';
		body = JSON.stringify(opts.json);
	}
	let res;
	try {
		res = await fetch(API + path, {
			method: opts.method || (body !== undefined ? 'POST' : 'GET'),
			headers: headers,
			body: body,
			cache: 'no-store',
		});
	} catch (e) {
		throw new ApiError(0, 'network', 'cannot reach baton serve (' + e.message + ')');
	}
	if (res.status === 401) {
		needLogin('The token was refused (401 unauthorized). Enter the token from .baton/token.');
		throw new ApiError(401, 'unauthorized', 'the token was refused');
	}
	if (!res.ok) {
		let code = 'http_' + res.status;
		let msg = 'HTTP ' + res.status + (res.statusText ? ' ' + res.statusText : '');
		let detail = null;
		try {
			const j = await res.json();
			if (j && j.error) {
				code = j.error.code || code;
				msg = j.error.message || msg;
				detail = j.error;
			}
		} catch (e) {
			/* not JSON: keep the status line */
		}
		throw new ApiError(res.status, code, msg, detail);
	}
	if (opts.text)
		return res.text();
	if (res.status === 204)
		return null;
	const t = await res.text();
	return t ? JSON.parse(t) : null;
}

function errText(e) {
	if (e instanceof ApiError)
		return e.code && e.status ? e.message + ' (' + e.code + ')' : e.message;
	return String(e && e.message ? e.message : e);
}

/* --- token and login ---------------------------------------------------- */

const TOKEN_KEY = 'baton.token';

/* Takes #token=... (alone or among other hash parts) and removes it from the URL. */
function takeHashToken() {
	const hash = location.hash;
	const m = /(^#|&)token=([^&]*)/.exec(hash);
	if (!m)
		return;
	try {
		token = decodeURIComponent(m[2]);
	} catch (e) {
		token = m[2];
	}
	sessionStorage.setItem(TOKEN_KEY, token);
	let rest = hash.slice(0, m.index) + (m[1] === '#' ? '#' : '') + hash.slice(m.index + m[0].length);
	rest = rest.replace(/^#&/, '#').replace(/&$/, '');
	if (rest === '#')
		rest = '';
	history.replaceState(null, '', location.pathname + location.search + rest);
}

function showLogin(msg) {
	showView('login');
	$('crumb').textContent = '';
	show($('logout'), false);
	const p = $('login-msg');
	p.textContent = msg || '';
	show(p, !!msg);
	$('token-input').value = '';
	$('token-input').focus();
}

function needLogin(msg) {
	token = '';
	sessionStorage.removeItem(TOKEN_KEY);
	started = false;
	stopStream();
	showLogin(msg);
}

$('login-form').addEventListener('submit', (ev) => {
	ev.preventDefault();
	const t = $('token-input').value.trim();
	if (!t) {
		showLogin('Enter the token.');
		return;
	}
	token = t;
	sessionStorage.setItem(TOKEN_KEY, token);
	start();
});

$('logout').addEventListener('click', () => {
	needLogin('');
});

/* --- views and routing -------------------------------------------------- */

let view = '';

function showView(name) {
	view = name;
	show($('login-view'), name === 'login');
	show($('board-view'), name === 'board');
	show($('run-view'), name === 'run');
	show($('charts-view'), name === 'charts');
	show($('chat-view'), name === 'chat');
	document.body.dataset.view = name;
}

function route() {
	if (!token) {
		showLogin('');
		return;
	}
	const m = /^#\/runs\/([^/?#&]+)/.exec(location.hash);
	if (m) {
		let id = m[1];
		try {
			id = decodeURIComponent(id);
		} catch (e) {
			/* keep it raw */
		}
		showRunPage(id);
	} else if (/^#\/charts\b/.test(location.hash)) {
		showCharts();
	} else if (/^#\/chat\b/.test(location.hash)) {
		const c = /^#\/chat\/(\d+)/.exec(location.hash);
		showChat(c ? Number(c[1]) : 0);
	} else {
		showBoard();
	}
}

window.addEventListener('hashchange', () => {
	if (/(^#|&)token=/.test(location.hash)) {
		takeHashToken();
		start();
		return;
	}
	if (started)
		route();
});

/* Checks the token, connects the stream, shows the page the URL names. */
async function start() {
	let health;
	started = false;
	try {
		health = await api('/health');
	} catch (e) {
		if (e.status !== 401)
			showLogin('Cannot load the dashboard: ' + errText(e));
		return;
	}
	started = true;
	show($('logout'), true);
	connectStream(health && typeof health.last_seq === 'number' ? health.last_seq : 0);
	route();
}

/* --- the live stream ---------------------------------------------------- */

let es = null;
let lastSeq = 0;
let retryTimer = 0;
let retryDelay = 1000;

function setLive(state, text) {
	const el = $('live');
	el.dataset.state = state;
	$('live-text').textContent = text;
}

function stopStream() {
	if (es) {
		es.close();
		es = null;
	}
	clearTimeout(retryTimer);
	setLive('off', 'offline');
}

/*
 * Opens the EventSource from seq `after` (events the page has not seen).
 * The browser reconnects by itself after a network error, sending
 * Last-Event-ID; when it gives up (the server answered an error), we check
 * the token and open a new one from the last seq we saw.
 */
function connectStream(after) {
	if (es)
		es.close();
	if (after > lastSeq)
		lastSeq = after;
	const q = new URLSearchParams({ access_token: token });
	if (lastSeq > 0)
		q.set('after', String(lastSeq));
	es = new EventSource(API + '/events?' + q.toString());
	setLive('connecting', 'connecting');
	es.onopen = () => {
		retryDelay = 1000;
		setLive('open', 'live');
	};
	es.onerror = () => {
		if (!es || es.readyState !== EventSource.CLOSED) {
			setLive('connecting', 'reconnecting');
			return;
		}
		setLive('error', 'disconnected');
		clearTimeout(retryTimer);
		retryTimer = setTimeout(async () => {
			try {
				await api('/health');
			} catch (e) {
				if (e.status === 401)
					return;
			}
			if (token)
				connectStream(lastSeq);
		}, retryDelay);
		retryDelay = Math.min(retryDelay * 2, 15000);
	};
	for (const t of STREAM_TYPES)
		es.addEventListener(t, onStreamEvent);
	es.onmessage = onStreamEvent;
}

function onStreamEvent(ev) {
	let m;
	try {
		m = JSON.parse(ev.data);
	} catch (e) {
		return;
	}
	if (!m || typeof m !== 'object')
		return;
	if (!m.type && ev.type && ev.type !== 'message')
		m.type = ev.type;
	const seq = typeof m.seq === 'number' ? m.seq : Number(ev.lastEventId) || 0;
	if (seq > lastSeq)
		lastSeq = seq;
	handleMessage(m);
}

/* Every live message: the board and the open run page take what is theirs. */
function handleMessage(m) {
	const tid = taskIdOf(m);
	if (m.type !== 'task:delta') {
		if (tid !== null) {
			if (typeof m.status === 'string')
				setCardRunStatus(tid, m.status);
			markDirty(tid);
		} else {
			scheduleCounts();
		}
	}
	runPageMessage(m);
	chartsMessage();
}

/* --- the board ---------------------------------------------------------- */

const cols = {};		/* status -> column state */
const cards = new Map();	/* task id -> { el, status, task } */
let boardBuilt = false;
let boardLoaded = false;
let boardStale = false;

function buildBoard() {
	const board = $('board');
	const frag = document.createDocumentFragment();
	for (const s of STATUSES) {
		const count = h('span', { class: 'count', id: 'count-' + s, 'data-testid': 'count-' + s }, '0');
		const list = h('ul', { class: 'cards', id: 'col-' + s, 'data-testid': 'cards-' + s });
		const empty = h('div', { class: 'empty', 'data-testid': 'empty-' + s }, 'nothing here');
		const more = h('button', {
			type: 'button', class: 'more ghost', id: 'more-' + s, 'data-testid': 'more-' + s,
		}, 'Show more');
		more.hidden = true;
		const sec = h('section', {
			class: 'column col-' + s, id: 'column-' + s, 'data-testid': 'column-' + s,
			'data-status': s,
		}, h('div', { class: 'column-head' }, h('h2', null, s), count), list, empty, more);
		cols[s] = {
			status: s, list: list, count: count, empty: empty, more: more, ids: [],
			next: null, loaded: false, gen: 0,
		};
		more.addEventListener('click', () => loadColumn(cols[s], true));
		frag.appendChild(sec);
	}
	board.appendChild(frag);
	board.addEventListener('click', onCardActivate);
	board.addEventListener('keydown', (ev) => {
		if (ev.key === 'Enter')
			onCardActivate(ev);
	});
	boardBuilt = true;
}

function onCardActivate(ev) {
	if (ev.target.closest('a'))
		return; /* a link out (the forge's issue or PR) opens itself */
	const card = ev.target.closest('.card.linked');
	if (!card || !card.dataset.run)
		return;
	location.hash = '#/runs/' + encodeURIComponent(card.dataset.run);
}

function showBoard() {
	showView('board');
	$('crumb').textContent = 'board';
	document.title = 'baton';
	if (!boardBuilt)
		buildBoard();
	if (!boardLoaded || boardStale)
		reloadBoard();
}

function reloadBoard() {
	boardLoaded = true;
	boardStale = false;
	for (const s of STATUSES)
		loadColumn(cols[s], false);
}

function setCounts(counts) {
	if (!counts || typeof counts !== 'object')
		return;
	for (const s of STATUSES) {
		if (typeof counts[s] === 'number')
			cols[s].count.textContent = fmtInt(counts[s]);
	}
}

/* A link out to the forge, only for an http(s) URL; else its text. */
function extLink(url, text, testid) {
	if (typeof url !== 'string' || !/^https?:\/\//i.test(url))
		return h('span', { 'data-testid': testid }, text);
	return h('a', { href: url, target: '_blank', rel: 'noopener noreferrer',
		'data-testid': testid }, text);
}

const CHECK_STATES = new Set(['success', 'failure', 'pending']);

/*
 * A task's place on the forge (its `forge` object: issue, PR, the PR's
 * checks and review, fix rounds), as a line of links; null without one.
 */
function forgeLine(f) {
	if (!f || typeof f !== 'object')
		return null;
	const line = h('div', { class: 'forge', 'data-testid': 'card-forge' });
	if (typeof f.issue === 'number')
		add(line, extLink(f.issue_url, 'issue #' + f.issue, 'forge-issue'));
	if (typeof f.pr === 'number') {
		add(line, extLink(f.pr_url, 'PR #' + f.pr, 'forge-pr'));
		if (f.pr_state && f.pr_state !== 'open')
			add(line, h('span', { class: 'pr-state' }, String(f.pr_state)));
		if (typeof f.checks === 'string') {
			const c = CHECK_STATES.has(f.checks) ? f.checks : 'unknown';
			add(line, h('span', { class: 'checks ck-' + c, 'data-testid': 'forge-checks',
				title: 'the PR\'s checks' }, f.checks));
		}
		if (typeof f.review === 'string')
			add(line, h('span', { class: 'review', title: 'review' }, f.review.replace(/_/g, ' ')));
		if (f.rounds > 0)
			add(line, h('span', { class: 'rounds', title: 'fix rounds from CI and review' },
				f.rounds + (f.rounds === 1 ? ' round' : ' rounds')));
	}
	return line.childElementCount ? line : null;
}

function cardEl(t) {
	const meta = h('div', { class: 'meta' }, h('span', { class: 'tid' }, '#' + t.id));
	if (t.priority)
		add(meta, h('span', { title: 'priority' }, 'p' + t.priority));
	if (t.status === 'running' || t.run)
		add(meta, h('span', { class: 'run-status', 'data-testid': 'card-run-status' }, t._run_status || ''));
	if (t.attempts > 1)
		add(meta, h('span', { title: 'attempts' }, 'try ' + t.attempts));
	add(meta, h('span', { class: 'age', title: fmtTime(t.updated_at || t.created_at) },
		fmtAge(t.updated_at || t.created_at)));
	let why = null;
	if (t.status === 'blocked' && (t.block_reason || t.reason))
		why = h('div', { class: 'why', 'data-testid': 'block-reason' },
			(t.block_reason || 'blocked') + (t.reason ? ': ' + t.reason : ''));
	else if ((t.status === 'failed' || t.status === 'cancelled') && t.reason)
		why = h('div', { class: 'why', 'data-testid': 'task-reason' }, t.reason);
	const li = h('li', {
		class: 'card' + (t.run ? ' linked' : ''),
		'data-testid': 'task-card',
		dataset: { id: t.id, status: t.status },
		title: t.run ? 'open run ' + t.run : null,
		tabindex: t.run ? '0' : null,
		role: t.run ? 'link' : null,
	}, h('div', { class: 'title', 'data-testid': 'task-title' }, t.title || '(untitled)'), why,
		forgeLine(t.forge), meta);
	if (t.run)
		li.dataset.run = t.run;
	return li;
}

/* Loads the first page of a column (more=false) or the next one. */
async function loadColumn(col, more) {
	const gen = more ? col.gen : ++col.gen;
	const q = new URLSearchParams({ status: col.status, limit: String(PAGE) });
	if (more) {
		if (col.next === null || col.next === undefined)
			return;
		q.set('before', String(col.next));
		col.more.disabled = true;
	}
	let ans;
	try {
		ans = await api('/tasks?' + q.toString());
	} catch (e) {
		col.more.disabled = false;
		if (e.status !== 401)
			col.empty.textContent = 'cannot load: ' + errText(e);
		show(col.empty, true);
		return;
	}
	if (gen !== col.gen)
		return;		/* a newer reload took over */
	if (!more) {
		for (const id of col.ids) {
			const c = cards.get(id);
			if (c && c.status === col.status)
				cards.delete(id);
		}
		col.ids = [];
		col.list.textContent = '';
	}
	const tasks = Array.isArray(ans && ans.tasks) ? ans.tasks : [];
	const frag = document.createDocumentFragment();
	for (const t of tasks) {
		const old = cards.get(t.id);
		if (old) {
			if (old.status === col.status)
				continue;
			removeCard(t.id);
		}
		const el = cardEl(t);
		cards.set(t.id, { el: el, status: col.status, task: t });
		col.ids.push(t.id);
		frag.appendChild(el);
	}
	col.list.appendChild(frag);
	setCounts(ans.counts);
	if (ans && 'next' in ans)
		col.next = ans.next;
	else
		col.next = tasks.length >= PAGE ? tasks[tasks.length - 1].id : null;
	col.loaded = true;
	col.more.disabled = false;
	col.empty.textContent = 'nothing here';
	show(col.more, col.next !== null && col.next !== undefined);
	show(col.empty, col.ids.length === 0);
}

function removeCard(id) {
	const c = cards.get(id);
	if (!c)
		return;
	const col = cols[c.status];
	if (col) {
		const i = col.ids.indexOf(id);
		if (i >= 0)
			col.ids.splice(i, 1);
		show(col.empty, col.ids.length === 0);
	}
	c.el.remove();
	cards.delete(id);
}

/*
 * Puts a freshly read task where it belongs: in place when its status did
 * not change, else into its new column at its place by id (newest first),
 * unless that place is past the page the column has loaded.
 */
function placeTask(t) {
	if (!t || asId(t.id) === null)
		return;
	const cur = cards.get(t.id);
	if (cur && cur.task && cur.task._run_status && !t._run_status)
		t._run_status = cur.task._run_status;
	if (t.status !== 'running' && cur && cur.status !== t.status)
		t._run_status = '';
	const col = cols[t.status];
	if (cur && cur.status === t.status) {
		const el = cardEl(t);
		cur.el.replaceWith(el);
		cur.el = el;
		cur.task = t;
		return;
	}
	if (cur)
		removeCard(t.id);
	if (!col || !col.loaded)
		return;
	const ids = col.ids;
	if (col.next !== null && col.next !== undefined && ids.length && t.id < ids[ids.length - 1])
		return;
	let lo = 0, hi = ids.length;
	while (lo < hi) {
		const mid = (lo + hi) >> 1;
		if (ids[mid] > t.id)
			lo = mid + 1;
		else
			hi = mid;
	}
	const el = cardEl(t);
	el.classList.add('flash');
	ids.splice(lo, 0, t.id);
	col.list.insertBefore(el, col.list.children[lo] || null);
	cards.set(t.id, { el: el, status: t.status, task: t });
	show(col.empty, false);
}

function setCardRunStatus(tid, status) {
	const c = cards.get(tid);
	if (!c)
		return;
	c.task._run_status = status;
	const span = c.el.querySelector('.run-status');
	if (span)
		span.textContent = status;
}

/* Dirty tasks: re-read in one batch at most every 250 ms. */
const dirty = new Set();
let dirtyTimer = 0;
let flushing = false;
let countsWanted = false;

function markDirty(id) {
	dirty.add(id);
	scheduleFlush();
}

function scheduleCounts() {
	countsWanted = true;
	scheduleFlush();
}

function scheduleFlush() {
	if (!dirtyTimer && !flushing)
		dirtyTimer = setTimeout(flushDirty, 250);
}

async function flushDirty() {
	dirtyTimer = 0;
	if (view !== 'board' || !boardLoaded) {
		/* out of sight: read it all again when the board is shown */
		if (dirty.size || countsWanted)
			boardStale = true;
		dirty.clear();
		countsWanted = false;
		return;
	}
	flushing = true;
	const ids = Array.from(dirty);
	dirty.clear();
	countsWanted = false;
	try {
		if (ids.length > DIRTY_BATCH_MAX) {
			reloadBoard();
		} else {
			for (let i = 0; i < ids.length; i += 6) {
				const part = ids.slice(i, i + 6);
				const got = await Promise.all(part.map((id) =>
					api('/tasks/' + id).catch((e) => (e.status === 404 ? { gone: id } : null))));
				for (const t of got) {
					if (t && t.gone !== undefined)
						removeCard(t.gone);
					else if (t && t.task && typeof t.task === 'object')
						placeTask(t.task);
					else
						placeTask(t);
				}
			}
			const c = await api('/tasks?limit=1');
			setCounts(c && c.counts);
		}
	} catch (e) {
		/* a 401 brought the form back; anything else waits for the next event */
	}
	flushing = false;
	if (dirty.size || countsWanted)
		scheduleFlush();
}

/* --- adding a task ------------------------------------------------------ */

function formMsg(el, text, ok) {
	el.textContent = text;
	el.className = 'msg ' + (ok ? 'ok' : 'error');
	show(el, !!text);
}

$('add-form').addEventListener('submit', async (ev) => {
	ev.preventDefault();
	const msg = $('add-msg');
	const title = $('add-title').value.trim();
	const body = $('add-body').value;
	const ptext = $('add-priority').value.trim();
	if (!title) {
		formMsg(msg, 'A task needs a title.', false);
		$('add-title').focus();
		return;
	}
	const req = { title: title };
	if (ptext !== '') {
		if (!/^-?[0-9]+$/.test(ptext)) {
			formMsg(msg, 'The priority must be a whole number.', false);
			return;
		}
		req.priority = Number(ptext);
	}
	if (body.trim())
		req.body = body;
	$('add-submit').disabled = true;
	try {
		let t = await api('/tasks', { method: 'POST', json: req });
		if (t && t.task && typeof t.task === 'object')
			t = t.task;
		formMsg(msg, 'Added task #' + (t && t.id !== undefined ? t.id : '?') + '.', true);
		$('add-title').value = '';
		$('add-body').value = '';
		placeTask(t);
		scheduleCounts();
	} catch (e) {
		formMsg(msg, 'Could not add the task: ' + errText(e), false);
	} finally {
		$('add-submit').disabled = false;
	}
});

/* --- the run page ------------------------------------------------------- */

/*
 * State of the open run page. `key` is the id from the URL; `run` the
 * record once read. Messages that arrive before the run's past events are
 * read wait in `pending`; `seen` holds the seqs already shown, so the
 * overlap of the two is shown once.
 */
const rp = {
	key: null, run: null, loading: false, pending: [], seen: new Set(),
	outLen: 0, outQueue: '', outFrame: 0, timelineN: 0, refreshTimer: 0,
	slowTimer: 0, ask: null, diffLoaded: false, forgeFact: null,
	evs: [], chartTimer: 0,
};

function resetRunPage() {
	rp.run = null;
	rp.forgeFact = null;
	rp.pending = [];
	rp.seen = new Set();
	rp.outLen = 0;
	rp.outQueue = '';
	rp.timelineN = 0;
	rp.evs = [];
	clearTimeout(rp.chartTimer);
	rp.chartTimer = 0;
	$('chart-stages').textContent = '';
	$('stages-sum').textContent = '';
	$('chart-usage').textContent = '';
	$('usage-sum').textContent = '';
	$('chart-groups').textContent = '';
	show($('groups-section'), false);
	clearTimeout(rp.refreshTimer);
	clearTimeout(rp.slowTimer);
	rp.refreshTimer = 0;
	rp.slowTimer = 0;
	$('run-id').textContent = rp.key;
	$('run-title').textContent = '';
	$('run-body').textContent = '';
	$('run-status').textContent = '';
	$('run-status').className = 'badge';
	$('run-facts').textContent = '';
	show($('run-reason'), false);
	$('output').textContent = '';
	$('timeline').textContent = '';
	$('timeline-count').textContent = '';
	$('artifacts').textContent = '';
	$('files').textContent = '';
	show($('artifact-view'), false);
	$('reports').textContent = '';
	$('diff').textContent = '';
	$('diff-stat').textContent = '';
	show($('run-msg'), false);
	closeAsk();
	closeDrift();
	for (const b of ['approve', 'changes', 'reject', 'pause', 'resume', 'steer', 'rewind', 'abort'])
		show($('btn-' + b), false);
}

function runPath(suffix) {
	const id = rp.run ? rp.run.id : rp.key;
	return '/runs/' + encodeURIComponent(id) + (suffix || '');
}

async function showRunPage(key) {
	showView('run');
	$('crumb').textContent = 'run ' + key;
	document.title = 'baton \u2014 run ' + key;
	if (rp.key === key && rp.run) {
		refreshRun();
		return;
	}
	rp.key = key;
	resetRunPage();
	rp.loading = true;
	try {
		const r = await api('/runs/' + encodeURIComponent(key));
		if (rp.key !== key)
			return;
		rp.run = r;
		renderRunHead(r);
	} catch (e) {
		if (rp.key === key) {
			rp.loading = false;
			runMsg('Cannot load run ' + key + ': ' + errText(e), false);
		}
		return;
	}
	await loadRunEvents(key);
	if (rp.key !== key)
		return;
	loadForge(key);
	loadArtifacts();
	loadFiles();
	loadReports();
	loadDiff();
}

function fact(dl, name, value, testid) {
	if (value === null || value === undefined || value === '')
		return;
	dl.appendChild(h('div', null, h('dt', null, name),
		h('dd', { 'data-testid': testid || null }, String(value))));
}

function renderRunHead(r) {
	$('run-id').textContent = r.id + (r.task_id !== undefined && r.task_id !== null ? '  \u00b7  task #' + r.task_id : '');
	/* `task` is the task's text: its title, then its body after a blank line */
	const text = typeof r.task === 'string' && r.task ? r.task : (r.title || r.id);
	const nl = text.indexOf('\n');
	$('run-title').textContent = nl < 0 ? text : text.slice(0, nl);
	const body = $('run-body');
	body.textContent = nl < 0 ? '' : text.slice(nl + 1).replace(/^\s+/, '');
	show(body, body.textContent !== '');
	const st = $('run-status');
	st.textContent = r.status || '';
	st.className = 'badge s-' + String(r.status || '').replace(/[^a-z_]/g, '');
	$('crumb').textContent = 'run ' + r.id;
	document.title = 'baton \u2014 ' + r.id + ' (' + r.status + ')';
	const dl = $('run-facts');
	const frag = document.createDocumentFragment();
	const box = { appendChild: (n) => frag.appendChild(n) };
	fact(box, 'stage', r.stage, 'fact-stage');
	fact(box, 'pipeline', r.pipeline, 'fact-pipeline');
	if (r.state && r.state !== r.status)
		fact(box, 'state', r.state, 'fact-state');
	if (r.loop)
		fact(box, 'loop', 'iteration ' + r.loop.iteration + ' of ' + r.loop.max_iterations +
			(r.loop.phase ? ', ' + r.loop.phase : '') + ', ' +
			(r.loop.receipts || 0) + ' receipts', 'fact-loop');
	const ask = r.progress && r.progress.ask;
	if (ask && r.status === 'waiting_for_approval') {
		fact(box, 'question', (ask.kind ? ask.kind + ': ' : '') + (ask.question || ''), 'fact-question');
		if (ask.default && ask.deadline_ms)
			fact(box, 'default', ask.default + ' at ' + fmtTime(ask.deadline), 'fact-default');
	}
	fact(box, 'branch', r.branch, 'fact-branch');
	if (r.gate_status && r.status === 'waiting_for_approval')
		fact(box, 'waiting at gate', r.gate_status, 'fact-gate');
	if (r.paused_at_status && r.status === 'paused')
		fact(box, 'paused at', r.paused_at_status, 'fact-paused-at');
	fact(box, 'tokens in / out', fmtInt(r.tokens_in || 0) + ' / ' + fmtInt(r.tokens_out || 0), 'fact-tokens');
	fact(box, 'cost', fmtCost(typeof r.cost_usd === 'number' ? r.cost_usd : 0), 'fact-cost');
	fact(box, 'active', fmtDuration(r.active_ms), 'fact-active');
	fact(box, 'created', fmtTime(r.created_at), 'fact-created');
	fact(box, 'started', fmtTime(r.started_at), 'fact-started');
	fact(box, 'updated', fmtTime(r.updated_at), 'fact-updated');
	fact(box, 'ended', fmtTime(r.ended_at), 'fact-ended');
	if (r.review_loops)
		fact(box, 'review loops', r.review_loops + (r.max_review_loops ? ' of ' + r.max_review_loops : ''), 'fact-loops');
	if (r.attempt > 1)
		fact(box, 'attempt', r.attempt, 'fact-attempt');
	dl.textContent = '';
	dl.appendChild(frag);
	if (rp.forgeFact)
		dl.appendChild(rp.forgeFact); /* loadForge's, kept across refreshes */
	const reason = $('run-reason');
	reason.textContent = r.reason || '';
	show(reason, !!r.reason);
	updateActions(r);
	renderClaims(r);
}

/*
 * A research run's claims (id, status, confidence, evidence count, text)
 * and its report.md, from the run's "research" view; hidden for other
 * runs. The report is read again when the run's stage or status moves.
 */
function renderClaims(r) {
	const st = r && typeof r.research === 'object' && r.research ? r.research : null;
	show($('claims-section'), !!st);
	if (!st) {
		rp.reportKey = '';
		return;
	}
	const claims = Array.isArray(st.claims) ? st.claims : [];
	$('claims-round').textContent = 'round ' + (st.round || 1) +
		(st.judgement && st.judgement.verdict ? ' \u00b7 judge: ' + st.judgement.verdict : '');
	$('claims-body').replaceChildren(...claims.map((c) => h('tr', { 'data-testid': 'claim' },
		h('td', null, String(c.id || '')),
		h('td', { class: 'c-' + String(c.status || 'pending').replace(/[^a-z]/g, '') }, String(c.status || 'pending')),
		h('td', null, typeof c.confidence === 'number' ? c.confidence.toFixed(2) : '\u2014'),
		h('td', null, String(Array.isArray(c.evidence) ? c.evidence.length : 0)),
		h('td', { class: 'claim-text' }, String(c.text || '')))));
	const key = r.id + ' ' + r.stage + ' ' + r.status + ' ' + (st.report || '');
	if (rp.reportKey === key)
		return;
	rp.reportKey = key;
	const pre = $('research-report');
	if (!st.report) {
		pre.textContent = 'no report yet';
		return;
	}
	api(runPath('/artifacts/' + encodeURIComponent(st.report)), { text: true }).then((text) => {
		if (rp.reportKey === key)
			pre.textContent = String(text);
	}).catch((e) => {
		if (rp.reportKey === key)
			pre.textContent = 'cannot load ' + st.report + ': ' + errText(e);
	});
}

function updateActions(r) {
	const s = r.status || '';
	const term = TERMINAL_RUN.has(s);
	const wait = s === 'waiting_for_approval';
	const paused = s === 'paused';
	show($('btn-approve'), wait);
	show($('btn-changes'), wait);
	show($('btn-reject'), wait);
	show($('btn-pause'), !term && !wait && !paused && !r.pause_requested);
	show($('btn-resume'), paused || (!term && !!r.pause_requested));
	show($('btn-steer'), !term);
	/* a rewind: a paused run in place, a terminal one into a new run */
	show($('btn-rewind'), term || paused);
	show($('btn-abort'), !term);
	if (term) {
		if (rp.ask !== 'rewind')
			closeAsk();
		closeDrift();
	}
	$('run-actions').dataset.status = s;
}

function runMsg(text, ok) {
	formMsg($('run-msg'), text, ok);
}

/* Re-reads the run header, at most every 300 ms. */
function refreshRunSoon() {
	if (!rp.refreshTimer)
		rp.refreshTimer = setTimeout(refreshRun, 300);
}

async function refreshRun() {
	rp.refreshTimer = 0;
	if (!rp.run)
		return;
	const key = rp.key;
	try {
		const r = await api(runPath());
		if (rp.key !== key)
			return;
		const was = rp.run;
		rp.run = r;
		renderRunHead(r);
		runChartsSoon();
		if (was.status !== r.status && (TERMINAL_RUN.has(r.status) || was.stage !== r.stage))
			refreshSlowSoon();
	} catch (e) {
		/* shown on the next action */
	}
}

/* Artifacts and the diff change with stages: re-read them, at most every 1.5 s. */
function refreshSlowSoon() {
	if (!rp.slowTimer) {
		rp.slowTimer = setTimeout(() => {
			rp.slowTimer = 0;
			loadArtifacts();
			loadFiles();
			loadDiff();
		}, 1500);
	}
}

async function loadRunEvents(key) {
	let after = 0;
	let n = 0;
	try {
		for (let page = 0; page < 40; page++) {
			const q = new URLSearchParams({ limit: '500' });
			if (after)
				q.set('after', String(after));
			const ans = await api(runPath('/events?' + q.toString()));
			if (rp.key !== key)
				return;
			const evs = Array.isArray(ans && ans.events) ? ans.events : [];
			for (const ev of evs)
				addRunEvent(ev, false);
			n += evs.length;
			const next = ans ? ans.next : null;
			if (evs.length < 500 || next === null || next === undefined || next === after)
				break;
			after = next;
		}
	} catch (e) {
		if (rp.key === key)
			runMsg('Cannot load the events: ' + errText(e), false);
	}
	rp.loading = false;
	const pending = rp.pending;
	rp.pending = [];
	for (const m of pending)
		runPageMessage(m);
	return n;
}

/* The text an agent_output event or a task:delta message carries. */
function outputText(d) {
	if (!d)
		return '';
	for (const k of ['text', 'line', 'chunk', 'output', 'data']) {
		if (typeof d[k] === 'string')
			return d[k];
	}
	return '';
}

function isOutputEvent(ev) {
	return ev.type === 'agent_output' || ev.type === 'output' || ev.type === 'agent_delta';
}

/* One event of the run: agent output to the output box, the rest to the timeline. */
function addRunEvent(ev, live) {
	if (!ev || typeof ev !== 'object')
		return;
	if (typeof ev.seq === 'number') {
		if (rp.seen.has(ev.seq))
			return;
		rp.seen.add(ev.seq);
	}
	if (isOutputEvent(ev)) {
		appendOutput(outputText(dataOf(ev)));
		return;
	}
	rp.evs.push(ev);
	if (rp.evs.length > RUN_EVENTS_KEPT)
		rp.evs.splice(0, rp.evs.length - RUN_EVENTS_KEPT);
	runChartsSoon();
	addTimeline(ev, live);
}

function eventDetail(ev) {
	const d = dataOf(ev);
	const parts = [];
	if (ev.from || ev.to)
		parts.push((ev.from || '(new)') + ' \u2192 ' + (ev.to || ''));
	for (const k of ['stage', 'decision', 'gate', 'reason', 'guidance', 'text', 'message', 'error']) {
		if (d[k] !== undefined && d[k] !== null && d[k] !== '' && typeof d[k] !== 'object')
			parts.push(k + ': ' + brief(d[k], 240));
	}
	if (!parts.length) {
		/* the rest: its plain fields, key=value */
		for (const k of Object.keys(d)) {
			const v = d[k];
			if (v === null || v === undefined || v === '' || typeof v === 'object')
				continue;
			parts.push(k + '=' + brief(v, 120));
			if (parts.length >= 8)
				break;
		}
	}
	return parts.join('  \u00b7  ');
}

/* Who did it, when a person decided (the token's name, data.actor); else nothing. */
function eventActor(ev) {
	const who = dataOf(ev).actor;
	if (typeof who !== 'string' || !who)
		return null;
	return h('span', { class: 'actor', 'data-testid': 'timeline-actor', title: 'done with the token ' + who },
		' by ' + who);
}

function addTimeline(ev, live) {
	const ol = $('timeline');
	const type = String(ev.type || 'event');
	const li = h('li', {
		class: 't-' + type.replace(/[^a-z_]/g, ''), 'data-testid': 'timeline-item',
		dataset: { seq: ev.seq !== undefined ? ev.seq : '', type: type,
			ts: typeof ev.ts === 'string' ? ev.ts : '' },
	},
		h('span', { class: 'when', title: fmtTime(ev.ts) }, fmtClock(ev.ts)),
		h('span', { class: 'what' }, h('span', { class: 'type' }, type), ' ',
			h('span', { class: 'detail' }, eventDetail(ev)),
			eventActor(ev)));
	const stick = ol.scrollTop + ol.clientHeight >= ol.scrollHeight - 4;
	ol.appendChild(li);
	rp.timelineN++;
	while (ol.childElementCount > TIMELINE_MAX)
		ol.firstElementChild.remove();
	$('timeline-count').textContent = rp.timelineN + ' event' + (rp.timelineN === 1 ? '' : 's');
	if (live && stick)
		ol.scrollTop = ol.scrollHeight;
	else if (!live)
		ol.scrollTop = ol.scrollHeight;
}

/*
 * The forge side of a run's task: the pull request that carries it (the
 * task's own, or, for a fix round, its parent's) as a fact, and the
 * reaction rounds, the rework tasks made from that PR's CI and review,
 * as items of the timeline at the time each was made. Only what the
 * task JSON says: a task with no PR shows nothing.
 */
async function loadForge(key) {
	const r = rp.run;
	if (!r || typeof r.task_id !== 'number')
		return;
	try {
		let t = await api('/tasks/' + r.task_id);
		let round = false;
		if (!(t.forge && typeof t.forge.pr === 'number') && t.origin === 'rework' &&
		    typeof t.parent === 'number') {
			const p = await api('/tasks/' + t.parent);
			if (!(p.forge && typeof p.forge.pr === 'number'))
				return;
			t = p;
			round = true;
		}
		if (rp.key !== key || !(t.forge && typeof t.forge.pr === 'number'))
			return;
		const dl = $('run-facts');
		const line = forgeLine(t.forge);
		if (round)
			add(line, h('span', null, 'this run is a fix round of task #' + t.id));
		rp.forgeFact = h('div', { 'data-testid': 'fact-forge' }, h('dt', null, 'pull request'),
			h('dd', null, line));
		dl.appendChild(rp.forgeFact);
		const ans = await api('/tasks?limit=1000');
		if (rp.key !== key)
			return;
		const rounds = (Array.isArray(ans && ans.tasks) ? ans.tasks : [])
			.filter((c) => c.parent === t.id && c.origin === 'rework')
			.sort((a, b) => a.id - b.id);
		rounds.forEach((c, i) => addRound(c, i + 1, t.forge.pr));
	} catch (e) {
		/* the forge is extra: the page works without it */
	}
}

/* One reaction round on the timeline, before the first later event. */
function addRound(c, n, pr) {
	const ol = $('timeline');
	const ts = typeof c.created_at === 'number' ? new Date(c.created_at).toISOString() : '';
	const what = h('span', { class: 'what' }, h('span', { class: 'type' }, 'reaction round ' + n), ' ',
		h('span', { class: 'detail' }, 'PR #' + pr + ': task #' + c.id + ' (' + c.status + ') ' +
			brief(c.title || '', 160)));
	if (c.run)
		add(what, [' ', h('a', { href: '#/runs/' + encodeURIComponent(c.run) }, c.run)]);
	const li = h('li', { class: 't-reaction_round', 'data-testid': 'timeline-round',
		dataset: { type: 'reaction_round', ts: ts, task: c.id } },
		h('span', { class: 'when', title: fmtTime(ts) }, fmtClock(ts)), what);
	let before = null;
	for (const it of ol.children) {
		if (ts && it.dataset.ts && it.dataset.ts > ts) {
			before = it;
			break;
		}
	}
	ol.insertBefore(li, before);
}

/* Agent output, appended once per frame, trimmed to OUTPUT_MAX characters. */
function appendOutput(text) {
	if (!text)
		return;
	rp.outQueue += text;
	if (!rp.outFrame)
		rp.outFrame = requestAnimationFrame(flushOutput);
}

function flushOutput() {
	rp.outFrame = 0;
	const pre = $('output');
	const text = rp.outQueue;
	rp.outQueue = '';
	if (!text)
		return;
	rp.outLen += text.length;
	if (rp.outLen > OUTPUT_MAX) {
		const keep = (pre.textContent + text).slice(-Math.floor(OUTPUT_MAX * 0.75));
		pre.textContent = '[earlier output trimmed]\n' + keep;
		rp.outLen = pre.textContent.length;
	} else {
		pre.appendChild(document.createTextNode(text));
	}
	if ($('output-follow').checked)
		pre.scrollTop = pre.scrollHeight;
}

/* A live message, if it is about the open run. */
function runPageMessage(m) {
	if (view !== 'run' || !rp.key)
		return;
	if (rp.loading || !rp.run) {
		if (rp.pending.length < 5000)
			rp.pending.push(m);
		return;
	}
	const rid = runIdOf(m);
	if (rid !== rp.run.id)
		return;
	if (m.type === 'task:delta') {
		if (typeof m.seq === 'number') {
			if (rp.seen.has(m.seq))
				return;
			rp.seen.add(m.seq);
		}
		let text = typeof m.text === 'string' ? m.text : outputText(dataOf(m.event));
		appendOutput(text);
		return;
	}
	const ev = m.event && typeof m.event === 'object' ? m.event : m;
	addRunEvent(ev, true);
	refreshRunSoon();
	if (ev.type === 'report' || (m.type === 'event' && /report/.test(String(ev.type))))
		loadReports();
	if (/artifact|stage_(done|ended|finished|output)/.test(String(ev.type)))
		refreshSlowSoon();
}

async function loadArtifacts() {
	if (!rp.run)
		return;
	const key = rp.key;
	const ul = $('artifacts');
	let ans;
	try {
		ans = await api(runPath('/artifacts'));
	} catch (e) {
		if (rp.key === key)
			ul.replaceChildren(h('li', { class: 'error' }, 'cannot load: ' + errText(e)));
		return;
	}
	if (rp.key !== key)
		return;
	const list = Array.isArray(ans && ans.artifacts) ? ans.artifacts : (Array.isArray(ans) ? ans : []);
	const frag = document.createDocumentFragment();
	const newest = new Map();
	for (const a of list) {
		const name = a.artifact || a.name;
		if (name && (!newest.has(name) || (a.version || 0) > newest.get(name)))
			newest.set(name, a.version || 0);
	}
	for (const a of list) {
		const name = a.artifact || a.name;
		if (!name)
			continue;
		const link = h('a', {
			href: '#', 'data-testid': 'artifact-link',
			dataset: { name: name, version: a.version !== undefined ? a.version : '' },
		}, name);
		link.addEventListener('click', (ev) => {
			ev.preventDefault();
			openArtifact(name, a.version, newest.get(name) === a.version);
		});
		const bits = [];
		if (a.stage)
			bits.push(a.stage);
		if (a.version !== undefined)
			bits.push('v' + a.version);
		if (a.decision)
			bits.push(a.decision);
		if (typeof a.size === 'number')
			bits.push(fmtSize(a.size));
		if (a.created_at)
			bits.push(fmtTime(a.created_at));
		frag.appendChild(h('li', { 'data-testid': 'artifact' }, link,
			h('span', { class: 'muted small' }, bits.join(' \u00b7 '))));
	}
	if (!list.length)
		frag.appendChild(h('li', { class: 'muted' }, 'no artifacts yet'));
	ul.replaceChildren(frag);
}

async function openArtifact(name, version, newest) {
	const key = rp.key;
	const box = $('artifact-view');
	const pre = $('artifact-text');
	$('artifact-name').textContent = name + (version !== undefined ? ' (v' + version + ')' : '');
	pre.textContent = 'loading\u2026';
	show(box, true);
	let q = '';
	if (version !== undefined && !newest)
		q = '?version=' + encodeURIComponent(version);
	try {
		let text = await api(runPath('/artifacts/' + encodeURIComponent(name) + q), { text: true });
		if (rp.key !== key)
			return;
		if (/\.json$/.test(name)) {
			try {
				text = JSON.stringify(JSON.parse(text), null, 2);
			} catch (e) {
				/* show it as it is */
			}
		}
		pre.textContent = text;
	} catch (e) {
		if (rp.key === key)
			pre.textContent = 'cannot load ' + name + ': ' + errText(e);
	}
}

/*
 * The run folder's files as the store keeps them (prompts, transcripts,
 * reports), whichever host drove the run. They open in the artifact view;
 * a file cut at the store's cap says so, and where the whole of it is.
 */
async function loadFiles() {
	if (!rp.run)
		return;
	const key = rp.key;
	const ul = $('files');
	let ans;
	try {
		ans = await api(runPath('/files'));
	} catch (e) {
		if (rp.key === key)
			ul.replaceChildren(h('li', { class: 'error' }, 'cannot load: ' + errText(e)));
		return;
	}
	if (rp.key !== key)
		return;
	const list = Array.isArray(ans && ans.files) ? ans.files : [];
	const frag = document.createDocumentFragment();
	for (const f of list) {
		if (!f || typeof f.name !== 'string')
			continue;
		const link = h('a', { href: '#', 'data-testid': 'file-link' }, f.name);
		link.addEventListener('click', (ev) => {
			ev.preventDefault();
			openFile(f.name);
		});
		const bits = [];
		if (typeof f.size === 'number')
			bits.push(fmtSize(f.size));
		if (f.truncated)
			bits.push('cut at ' + fmtSize(f.stored));
		if (f.host)
			bits.push(String(f.host));
		frag.appendChild(h('li', { 'data-testid': 'file' }, link,
			h('span', { class: 'muted small' }, bits.join(' \u00b7 '))));
	}
	if (!list.length)
		frag.appendChild(h('li', { class: 'muted' }, 'no files yet'));
	ul.replaceChildren(frag);
}

async function openFile(name) {
	const key = rp.key;
	const pre = $('artifact-text');
	$('artifact-name').textContent = name;
	pre.textContent = 'loading\u2026';
	show($('artifact-view'), true);
	try {
		const f = await api(runPath('/file?name=' + encodeURIComponent(name)));
		if (rp.key !== key)
			return;
		let text = typeof f.content === 'string' ? f.content : '';
		if (f.truncated)
			text += '\n\n[the store keeps the first ' + fmtSize(f.stored) + ' of ' +
				fmtSize(f.size) + '; the whole file is at ' + f.host + ':' + f.path + ']';
		pre.textContent = text;
	} catch (e) {
		if (rp.key === key)
			pre.textContent = 'cannot load ' + name + ': ' + errText(e);
	}
}

$('files-refresh').addEventListener('click', () => loadFiles());
$('artifact-close').addEventListener('click', () => show($('artifact-view'), false));
$('artifacts-refresh').addEventListener('click', () => loadArtifacts());
$('reports-refresh').addEventListener('click', () => loadReports());
$('diff-refresh').addEventListener('click', () => loadDiff());

async function loadDiff() {
	if (!rp.run)
		return;
	const key = rp.key;
	const pre = $('diff');
	let text;
	try {
		text = await api(runPath('/diff'), { text: true });
	} catch (e) {
		if (rp.key === key) {
			pre.textContent = 'cannot load the diff: ' + errText(e);
			$('diff-stat').textContent = '';
		}
		return;
	}
	if (rp.key !== key)
		return;
	renderDiff(text || '');
}

function renderDiff(text) {
	const pre = $('diff');
	const lines = text.split('\n');
	if (lines.length && lines[lines.length - 1] === '')
		lines.pop();
	const frag = document.createDocumentFragment();
	let adds = 0, dels = 0, files = 0;
	const n = Math.min(lines.length, DIFF_MAX_LINES);
	for (let i = 0; i < lines.length; i++) {
		const l = lines[i];
		let cls = '';
		if (l.startsWith('diff --git')) {
			files++;
			cls = 'meta';
		} else if (l.startsWith('+++') || l.startsWith('---') || l.startsWith('index ') ||
			   l.startsWith('new file') || l.startsWith('deleted file') ||
			   l.startsWith('similarity') || l.startsWith('rename ')) {
			cls = 'meta';
		} else if (l.startsWith('@@')) {
			cls = 'hunk';
		} else if (l.startsWith('+')) {
			cls = 'add';
			adds++;
		} else if (l.startsWith('-')) {
			cls = 'del';
			dels++;
		}
		if (i < n)
			frag.appendChild(h('span', { class: cls || null }, l + '\n'));
	}
	if (lines.length > n)
		frag.appendChild(h('span', { class: 'meta' }, '[' + (lines.length - n) + ' more lines not shown]\n'));
	if (!lines.length)
		frag.appendChild(h('span', { class: 'muted' }, 'no changes'));
	pre.replaceChildren(frag);
	$('diff-stat').textContent = lines.length ?
		files + ' file' + (files === 1 ? '' : 's') + ', +' + adds + ' \u2212' + dels : '';
}

async function loadReports() {
	if (!rp.run)
		return;
	const key = rp.key;
	const box = $('reports');
	let ans;
	try {
		ans = await api(runPath('/reports'));
	} catch (e) {
		if (rp.key === key)
			box.replaceChildren(h('p', { class: 'error' }, 'cannot load: ' + errText(e)));
		return;
	}
	if (rp.key !== key)
		return;
	const list = Array.isArray(ans && ans.reports) ? ans.reports : (Array.isArray(ans) ? ans : []);
	const frag = document.createDocumentFragment();
	for (const r of list)
		frag.appendChild(reportEl(r));
	if (!list.length)
		frag.appendChild(h('p', { class: 'muted' }, 'no reports yet (a run reports when it ends, and as it goes once it runs long)'));
	box.replaceChildren(frag);
}

/* Any JSON value as readable elements: text, a list, or key: value lines. */
function valueEl(v) {
	if (v === null || v === undefined || v === '')
		return h('p', { class: 'muted' }, 'none');
	if (Array.isArray(v)) {
		if (!v.length)
			return h('p', { class: 'muted' }, 'none');
		return h('ul', null, v.map((x) => h('li', null, typeof x === 'object' ? brief(x, 1000) : String(x))));
	}
	if (typeof v === 'object') {
		const keys = Object.keys(v);
		if (!keys.length)
			return h('p', { class: 'muted' }, 'none');
		return h('ul', null, keys.map((k) => h('li', null, k + ': ' +
			(v[k] === null || v[k] === undefined ? '\u2014' :
			 typeof v[k] === 'object' ? brief(v[k], 1000) : String(v[k])))));
	}
	return h('p', null, String(v));
}

function reportEl(r) {
	const d = r && typeof r.data === 'object' && r.data ? Object.assign({}, r, r.data) : (r || {});
	const head = ['Report'];
	if (d.n !== undefined)
		head.push(String(d.n));
	else if (d.seq !== undefined)
		head.push('#' + d.seq);
	if (d.kind || d.trigger)
		head.push('(' + (d.kind || d.trigger) + ')');
	if (d.stage)
		head.push('after ' + d.stage);
	if (d.status)
		head.push('\u00b7 ' + d.status);
	const sec = h('section', { class: 'report', 'data-testid': 'report' },
		h('h3', null, head.join(' '), ' ', h('span', { class: 'muted small' }, fmtTime(d.ts || d.created_at))));
	for (const p of REPORT_PARTS) {
		sec.appendChild(h('h4', null, p));
		const v = valueEl(d[p]);
		v.dataset.part = p;
		sec.appendChild(v);
	}
	return sec;
}

/* --- run controls ------------------------------------------------------- */

async function act(label, path, body) {
	const key = rp.key;
	const buttons = document.querySelectorAll('#run-actions button, #drift button');
	for (const b of buttons)
		b.disabled = true;
	try {
		const ans = await api(path, { method: 'POST', json: body || {} });
		if (rp.key !== key)
			return true;
		closeDrift();
		if (ans && ans.fresh_of) {
			freshMsg(label, ans);
		} else if (ans && ans.rewound_from) {
			runMsg(label + ': a new run at ' + String(ans.rewound_to || '') + ': ', true);
			$('run-msg').append(h('a', { href: '#/runs/' + encodeURIComponent(String(ans.id || '')),
				'data-testid': 'rewind-link' }, String(ans.id || '')),
				ans.driven === false ? '; no worker drives it: start it with `baton resume ' + String(ans.id || '') + '`.' :
					'; a worker drives it.');
		} else {
			let text = label + ': done.';
			if (ans && ans.driven === false)
				text += ' No worker drives this run: resume it with `baton resume`.';
			runMsg(text, true);
		}
		refreshRun();
		return true;
	} catch (e) {
		if (rp.key !== key)
			return false;
		if (e instanceof ApiError && e.code === 'config_drift') {
			openDrift(e.detail);
			runMsg(label + ': the config changed since this run started; choose how it goes on.', false);
		} else {
			runMsg(label + ' failed: ' + errText(e), false);
		}
		return false;
	} finally {
		for (const b of buttons)
			b.disabled = false;
	}
}

/* The run was started afresh: say so, with a link to the new run. */
function freshMsg(label, ans) {
	const id = String(ans.id || '');
	runMsg(label + ': started afresh as ', true);
	$('run-msg').append(h('a', { href: '#/runs/' + encodeURIComponent(id), 'data-testid': 'fresh-link' }, id),
		ans.driven === false ? '; no worker drives it: start it with `baton resume ' + id + '`.' :
			'; a worker drives it.');
}

/*
 * A resume refused for config drift (409 config_drift): the changed keys,
 * one per line, and the three answers, each of which resumes again.
 */
function openDrift(detail) {
	const changes = detail && Array.isArray(detail.changes) ? detail.changes : [];
	$('drift-head').textContent = changes.length ?
		'The config changed since this run started:' :
		'The config changed since this run started.';
	$('drift-changes').replaceChildren(...changes.map((c) => h('li', null, String(c))));
	show($('drift'), true);
}

function closeDrift() {
	show($('drift'), false);
	$('drift-changes').textContent = '';
}

/* A second click within 4 s confirms a button that ends something. */
function confirming(btn, label, fn) {
	const orig = btn.textContent;
	btn.addEventListener('click', () => {
		if (btn.dataset.armed === '1') {
			btn.dataset.armed = '';
			btn.textContent = orig;
			clearTimeout(btn._t);
			fn();
			return;
		}
		btn.dataset.armed = '1';
		btn.textContent = label;
		btn._t = setTimeout(() => {
			btn.dataset.armed = '';
			btn.textContent = orig;
		}, 4000);
	});
}

function approvalPath() {
	return '/approvals/' + encodeURIComponent(rp.run ? rp.run.id : rp.key);
}

function openAsk(kind, label, placeholder) {
	rp.ask = kind;
	$('ask-label').textContent = label;
	$('ask-text').value = '';
	$('ask-text').placeholder = placeholder;
	$('ask-form').dataset.kind = kind;
	show($('ask-form'), true);
	$('ask-text').focus();
}

function closeAsk() {
	rp.ask = null;
	show($('ask-form'), false);
}

$('btn-approve').addEventListener('click', () => act('Approve', approvalPath(), { decision: 'approve' }));
confirming($('btn-reject'), 'Confirm reject', () => act('Reject', approvalPath(), { decision: 'reject' }));
$('btn-changes').addEventListener('click', () =>
	openAsk('changes', 'Guidance for the re-run (required)', 'What should change?'));
$('btn-steer').addEventListener('click', () =>
	openAsk('steer', 'Guidance the next stage\u2019s agent reads', 'e.g. keep the public API unchanged'));
$('btn-pause').addEventListener('click', () => act('Pause', runPath('/pause')));
$('btn-resume').addEventListener('click', () => act('Resume', runPath('/resume')));
$('btn-rewind').addEventListener('click', () =>
	openAsk('rewind', 'Stage to go back to (its name or status)', 'e.g. execute'));
$('btn-drift-snapshot').addEventListener('click', () =>
	act('Resume with the original config', runPath('/resume'), { config: 'snapshot' }));
$('btn-drift-current').addEventListener('click', () =>
	act('Resume with the current config', runPath('/resume'), { config: 'current' }));
confirming($('btn-drift-fresh'), 'Confirm start fresh', () =>
	act('Start fresh', runPath('/resume'), { config: 'fresh' }));
confirming($('btn-abort'), 'Confirm abort', () => act('Abort', runPath('/abort')));
$('ask-cancel').addEventListener('click', closeAsk);
$('ask-form').addEventListener('submit', async (ev) => {
	ev.preventDefault();
	const text = $('ask-text').value.trim();
	if (!text) {
		runMsg(rp.ask === 'changes' ? 'Request changes needs guidance.' :
			rp.ask === 'rewind' ? 'Rewind needs a stage.' : 'Steering needs a text.', false);
		return;
	}
	let ok;
	if (rp.ask === 'changes')
		ok = await act('Request changes', approvalPath(), { decision: 'request-changes', guidance: text });
	else if (rp.ask === 'rewind')
		ok = await act('Rewind', runPath('/resume'), { from: text });
	else
		ok = await act('Steer', runPath('/steer'), { text: text });
	if (ok)
		closeAsk();
});

/* --- charts ------------------------------------------------------------- */

/*
 * The pictures: a run's stages on a time axis, its agent calls' tokens
 * and cost, its parallel groups' members side by side; and, on the charts
 * page, the queue over the last hours and the usage per day. Inline SVG
 * made with createElementNS; every name in them (stage statuses, gate
 * names, run titles) enters as a text node, like the rest of the page.
 */

const SVG_NS = 'http://www.w3.org/2000/svg';
const CHART_H_ROW = 22;
const CHART_LEFT = 140;
const RUN_EVENTS_KEPT = 20000;	/* events the run charts keep */
const LANE_CHARS = 18;		/* a lane's label, in the left margin */

/* s cut to n characters, with an ellipsis when it was longer. */
function clip(str, n) {
	return str.length > n ? str.slice(0, n - 1) + '\u2026' : str;
}

/* s('rect', {x: 1}, kids...): an SVG element; strings become text nodes. */
function s(tag, attrs, ...kids) {
	const n = document.createElementNS(SVG_NS, tag);
	if (attrs) {
		for (const k of Object.keys(attrs)) {
			const v = attrs[k];
			if (v === null || v === undefined || v === false)
				continue;
			if (k === 'text')
				n.textContent = String(v);
			else
				n.setAttribute(k, String(v));
		}
	}
	add(n, kids);
	return n;
}

/* A tooltip: SVG's <title>, as text. */
function tip(text) {
	return s('title', { text: text });
}

function chartWidth(box) {
	return Math.max(360, Math.floor(box.clientWidth || box.parentNode.clientWidth || 600));
}

/* Round-number ticks from 0 to max (about n of them); whole for counts. */
function niceTicks(max, n, whole) {
	if (!(max > 0))
		return [0];
	const raw = max / n;
	const mag = Math.pow(10, Math.floor(Math.log10(raw)));
	const f = raw / mag;
	let step = (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * mag;
	if (whole)
		step = Math.max(1, Math.round(step));
	/* up to the first tick at or above max, so the plot holds it all */
	const out = [0];
	for (let i = 1; out[out.length - 1] < max && i <= 50; i++)
		out.push(i * step);
	return out;
}

/* An axis's dollars: enough digits to tell the ticks apart. */
function fmtUsd(v) {
	if (v === 0)
		return '$0';
	return '$' + (v < 0.01 ? v.toFixed(4) : v < 1 ? v.toFixed(3) : fmtShort(v));
}

function fmtShort(n) {
	if (n >= 1e6)
		return (n / 1e6).toFixed(n >= 1e7 ? 0 : 1) + 'M';
	if (n >= 1e3)
		return (n / 1e3).toFixed(n >= 1e4 ? 0 : 1) + 'k';
	return String(Math.round(n * 100) / 100);
}

/* A time axis under the plot: a few ticks from t0 to t1 (ms). */
function timeAxis(g, x0, x1, y, t0, t1) {
	const span = Math.max(1, t1 - t0);
	/* no more ticks than whole seconds: the labels would repeat */
	const n = Math.max(1, Math.min(8, Math.floor((x1 - x0) / 110), Math.floor(span / 1000)));
	g.appendChild(s('line', { class: 'axis', x1: x0, x2: x1, y1: y, y2: y }));
	for (let i = 0; i <= n; i++) {
		const t = t0 + span * i / n;
		const x = x0 + (x1 - x0) * i / n;
		g.appendChild(s('line', { class: 'tick', x1: x, x2: x, y1: y, y2: y + 4 }));
		g.appendChild(s('text', {
			class: 'tick-label', x: x, y: y + 15,
			'text-anchor': i === 0 ? 'start' : i === n ? 'end' : 'middle',
		}, span < 3 * 86400000 ? fmtClock(t) : fmtTime(t).slice(5, 16)));
	}
}

/* A value axis on the left (or the right, right=true) with gridlines. */
function valueAxis(g, x0, x1, ytop, ybot, max, fmt, right) {
	const ticks = niceTicks(max, 4, fmt === fmtShort);
	const top = ticks[ticks.length - 1] || 1;
	for (const v of ticks) {
		const y = ybot - (ybot - ytop) * v / top;
		if (!right)
			g.appendChild(s('line', { class: 'grid', x1: x0, x2: x1, y1: y, y2: y }));
		g.appendChild(s('text', {
			class: 'tick-label', x: right ? x1 + 4 : x0 - 4, y: y + 4,
			'text-anchor': right ? 'start' : 'end',
		}, fmt(v)));
	}
	return top;
}

function emptyChart(box, text) {
	box.replaceChildren(h('p', { class: 'muted small', 'data-testid': 'chart-empty' }, text));
}

/* --- a run's stages ---- */

const WAIT_PEOPLE = 'waits for people';
const WAIT_QUOTA = 'waits for quota';

function tsOf(ev) {
	const d = toDate(ev.ts);
	return d ? d.getTime() : null;
}

/*
 * The spans of a run from its events: each status between its transition
 * in and the next one (a stage, a fix round, a gate or a pause: a wait
 * for people). A quota wait is the run `interrupted` for it (under serve,
 * until a worker takes the run again), else (baton run sleeps in the
 * stage) its quota_wait event for its wait_ms.
 */
function stageSpans(evs, run) {
	const spans = [];
	const trans = evs.filter((e) => e.type === 'transition' && tsOf(e) !== null);
	const quotas = evs.filter((e) => e.type === 'quota_wait' && tsOf(e) !== null);
	const used = new Set();
	const quotaLabel = (ev) => {
		const p = ev ? dataOf(ev).provider : null;
		return 'quota' + (p ? ': ' + p : '');
	};
	const terminal = run && TERMINAL_RUN.has(run.status);
	const endOfRun = terminal ? (toDate(run.ended_at || run.updated_at) || new Date()).getTime() : Date.now();
	let fixN = 0;
	for (let i = 0; i < trans.length; i++) {
		const ev = trans[i];
		const st = String(ev.to || '');
		if (!st || st === 'created' || TERMINAL_RUN.has(st))
			continue;
		const t0 = tsOf(ev);
		const t1 = i + 1 < trans.length ? tsOf(trans[i + 1]) : Math.max(t0, endOfRun);
		const d = dataOf(ev);
		let kind = 'stage', lane = st, label = st;
		if (st === 'waiting_for_approval') {
			kind = 'approval';
			lane = WAIT_PEOPLE;
			label = 'gate' + (d.gate ? ': ' + d.gate : '');
		} else if (st === 'paused') {
			kind = 'pause';
			lane = WAIT_PEOPLE;
			label = 'paused';
		} else if (st === 'fixing') {
			kind = 'fix';
			label = 'fix ' + (++fixN);
		} else if (st === 'interrupted' && d.cause === 'quota_wait') {
			let q = null;
			for (const e of quotas)
				if (tsOf(e) <= t0)
					q = e;
			if (q)
				used.add(q);
			kind = 'quota';
			lane = WAIT_QUOTA;
			label = quotaLabel(q);
		} else if (st === 'interrupted') {
			kind = 'other';
		}
		spans.push({ kind: kind, lane: lane, label: label, t0: t0, t1: t1 });
	}
	for (const ev of quotas) {
		if (used.has(ev))
			continue;
		const d = dataOf(ev);
		const t0 = tsOf(ev);
		const ms = typeof d.wait_ms === 'number' && d.wait_ms > 0 ? d.wait_ms : 0;
		spans.push({ kind: 'quota', lane: WAIT_QUOTA, t0: t0, t1: Math.min(t0 + ms, Math.max(t0, endOfRun)),
			label: quotaLabel(ev) });
	}
	return spans;
}

function renderStages() {
	const box = $('chart-stages');
	const spans = stageSpans(rp.evs, rp.run);
	if (!spans.length) {
		emptyChart(box, 'no stages yet');
		$('stages-sum').textContent = '';
		return;
	}
	const lanes = [];
	for (const sp of spans)
		if (sp.lane !== WAIT_PEOPLE && sp.lane !== WAIT_QUOTA && !lanes.includes(sp.lane))
			lanes.push(sp.lane);
	for (const w of [WAIT_PEOPLE, WAIT_QUOTA])
		if (spans.some((sp) => sp.lane === w))
			lanes.push(w);
	let t0 = Infinity, t1 = -Infinity;
	for (const sp of spans) {
		t0 = Math.min(t0, sp.t0);
		t1 = Math.max(t1, sp.t1);
	}
	if (t1 <= t0)
		t1 = t0 + 1000;
	const W = chartWidth(box), x0 = CHART_LEFT, x1 = W - 12;
	const H = lanes.length * CHART_H_ROW + 30;
	const X = (t) => x0 + (x1 - x0) * (t - t0) / (t1 - t0);
	const svg = s('svg', { class: 'chart-svg', width: W, height: H, viewBox: '0 0 ' + W + ' ' + H,
		role: 'img', 'aria-label': 'the run\'s stages over time', 'data-testid': 'stages-svg' });
	lanes.forEach((l, i) => {
		const y = i * CHART_H_ROW;
		svg.appendChild(s('rect', { class: 'lane' + (i % 2 ? ' odd' : ''), x: 0, y: y, width: W, height: CHART_H_ROW }));
		svg.appendChild(s('g', { 'data-testid': 'stage-lane', 'data-lane': l },
			s('text', { class: 'lane-label', x: x0 - 6, y: y + 15, 'text-anchor': 'end' },
				clip(l, LANE_CHARS)), tip(l)));
	});
	let fixes = 0, waits = 0;
	for (const sp of spans) {
		const i = lanes.indexOf(sp.lane);
		const xa = X(sp.t0), w = Math.max(2, X(sp.t1) - xa);
		const g = s('g', { class: 'span k-' + sp.kind, 'data-testid': 'stage-span',
			'data-kind': sp.kind, 'data-lane': sp.lane, 'data-label': sp.label });
		g.appendChild(s('rect', { x: xa, y: i * CHART_H_ROW + 3, width: w, height: CHART_H_ROW - 6, rx: 3 }));
		if (w > 46)
			g.appendChild(s('text', { class: 'span-label', x: xa + 4, y: i * CHART_H_ROW + 15 },
				sp.label.length * 6.5 > w - 8 ? sp.label.slice(0, Math.max(1, Math.floor((w - 8) / 6.5) - 1)) + '\u2026' : sp.label));
		g.appendChild(tip(sp.label + ' \u00b7 ' + fmtDuration(sp.t1 - sp.t0) + ' \u00b7 ' +
			fmtClock(sp.t0) + '\u2013' + fmtClock(sp.t1)));
		svg.appendChild(g);
		if (sp.kind === 'fix')
			fixes++;
		if (sp.kind === 'approval' || sp.kind === 'pause' || sp.kind === 'quota')
			waits += sp.t1 - sp.t0;
	}
	timeAxis(svg, x0, x1, lanes.length * CHART_H_ROW + 2, t0, t1);
	box.replaceChildren(svg);
	$('stages-sum').textContent = fmtDuration(t1 - t0) +
		(fixes ? ' \u00b7 ' + fixes + ' fix round' + (fixes === 1 ? '' : 's') : '') +
		(waits ? ' \u00b7 waited ' + fmtDuration(waits) : '');
}

/* --- a run's tokens and cost ---- */

/* The run's agent calls, from agent_exited: when, tokens, cost. */
function usageCalls(evs) {
	const out = [];
	for (const ev of evs) {
		if (ev.type !== 'agent_exited' || tsOf(ev) === null)
			continue;
		const d = dataOf(ev);
		out.push({
			t: tsOf(ev), call: String(d.call || ''), provider: String(d.provider || ''),
			tin: typeof d.tokens_in === 'number' ? d.tokens_in : 0,
			tout: typeof d.tokens_out === 'number' ? d.tokens_out : 0,
			cost: typeof d.cost_usd === 'number' ? d.cost_usd : 0,
		});
	}
	return out;
}

function renderUsage() {
	const box = $('chart-usage');
	const calls = usageCalls(rp.evs);
	if (!calls.length) {
		emptyChart(box, 'no agent calls yet');
		$('usage-sum').textContent = '';
		return;
	}
	let t0 = calls[0].t, t1 = calls[calls.length - 1].t;
	const created = rp.run ? toDate(rp.run.started_at || rp.run.created_at) : null;
	if (created && created.getTime() < t0)
		t0 = created.getTime();
	if (t1 - t0 < 1000)
		t1 = t0 + 1000;
	const W = chartWidth(box), x0 = 46, x1 = W - 56, top = 8, bot = 150, H = 180;
	let maxTok = 0, total = 0, tin = 0, tout = 0;
	for (const c of calls) {
		maxTok = Math.max(maxTok, c.tin + c.tout);
		total += c.cost;
		tin += c.tin;
		tout += c.tout;
	}
	$('usage-sum').textContent = calls.length + ' call' + (calls.length === 1 ? '' : 's') + ' \u00b7 ' +
		fmtInt(tin) + ' in / ' + fmtInt(tout) + ' out \u00b7 ' + fmtCost(total);
	if (!maxTok && !total) {
		emptyChart(box, 'the agents reported no tokens and no cost');
		return;
	}
	const svg = s('svg', { class: 'chart-svg', width: W, height: H, viewBox: '0 0 ' + W + ' ' + H,
		role: 'img', 'aria-label': 'tokens per agent call and the cost so far', 'data-testid': 'usage-svg' });
	const tokTop = valueAxis(svg, x0, x1, top, bot, maxTok, fmtShort, false);
	const costTop = total > 0 ? valueAxis(svg, x0, x1, top, bot, total, fmtUsd, true) : 1;
	const X = (t) => x0 + 6 + (x1 - x0 - 12) * (t - t0) / (t1 - t0);
	const bw = Math.max(3, Math.min(14, (x1 - x0) / (calls.length * 2)));
	const pts = [];
	let cum = 0;
	pts.push(X(t0) + ',' + bot);
	for (const c of calls) {
		const x = X(c.t);
		const hin = (bot - top) * c.tin / tokTop, hout = (bot - top) * c.tout / tokTop;
		svg.appendChild(s('g', { class: 'bar', 'data-testid': 'usage-bar', 'data-tokens': c.tin + c.tout,
			'data-cost': c.cost },
			s('rect', { class: 'tok-in', x: x - bw / 2, y: bot - hin, width: bw, height: hin }),
			s('rect', { class: 'tok-out', x: x - bw / 2, y: bot - hin - hout, width: bw, height: hout }),
			tip(c.call + (c.provider ? ' (' + c.provider + ')' : '') + ' at ' + fmtClock(c.t) + ': ' +
				fmtInt(c.tin) + ' in, ' + fmtInt(c.tout) + ' out, ' + fmtCost(c.cost))));
		cum += c.cost;
		pts.push(x + ',' + (bot - (bot - top) * cum / costTop));
	}
	if (total > 0)
		svg.appendChild(s('polyline', { class: 'cost-line', points: pts.join(' '),
			'data-testid': 'usage-cost-line' }, tip('cost so far: ' + fmtCost(total))));
	timeAxis(svg, x0, x1, bot, t0, t1);
	svg.appendChild(legend(x0, H - 6, [['tok-in', 'tokens in'], ['tok-out', 'tokens out'], ['cost-key', 'cost so far']]));
	box.replaceChildren(svg);
}

function legend(x, y, items) {
	const g = s('g', { class: 'legend' });
	let at = x;
	for (const [cls, text] of items) {
		g.appendChild(s('rect', { class: cls, x: at, y: y - 9, width: 10, height: 10 }));
		g.appendChild(s('text', { class: 'tick-label', x: at + 14, y: y }, text));
		at += 24 + text.length * 6.5;
	}
	return g;
}

/* --- a run's parallel groups ---- */

/*
 * Each parallel group (group_started) and its members: from the member's
 * stage_started (or review_done's started_ms) to review_done's ended_ms,
 * or to now while it runs, with the member's verdict.
 */
function groupsOf(evs) {
	const groups = [];
	let cur = null;
	for (const ev of evs) {
		const d = dataOf(ev);
		if (ev.type === 'group_started') {
			cur = { group: d.group, members: new Map(), done: false, t: tsOf(ev) };
			for (const st of Array.isArray(d.stages) ? d.stages : [])
				cur.members.set(String(st), { stage: String(st), t0: null, t1: null, status: '' });
			groups.push(cur);
		} else if (cur && ev.type === 'stage_started' && d.group !== undefined && d.group !== null) {
			const m = cur.members.get(String(d.stage));
			if (m && m.t0 === null)
				m.t0 = tsOf(ev);
		} else if (cur && ev.type === 'review_done') {
			const m = cur.members.get(String(d.stage));
			if (m) {
				if (typeof d.started_ms === 'number')
					m.t0 = d.started_ms;
				m.t1 = typeof d.ended_ms === 'number' ? d.ended_ms : tsOf(ev);
				m.status = String(d.status || '');
			}
		} else if (cur && ev.type === 'group_done') {
			cur.done = true;
			const v = d.verdicts && typeof d.verdicts === 'object' ? d.verdicts : {};
			for (const m of cur.members.values())
				if (!m.status && typeof v[m.stage] === 'string')
					m.status = v[m.stage];
			cur = null;
		}
	}
	return groups;
}

function renderGroups() {
	const box = $('chart-groups');
	const groups = groupsOf(rp.evs);
	show($('groups-section'), groups.length > 0);
	if (!groups.length) {
		box.textContent = '';
		return;
	}
	const frag = document.createDocumentFragment();
	const W = chartWidth(box);
	groups.forEach((gr, gi) => {
		const ms = Array.from(gr.members.values());
		let t0 = Infinity, t1 = -Infinity;
		for (const m of ms) {
			if (m.t0 !== null)
				t0 = Math.min(t0, m.t0);
			t1 = Math.max(t1, m.t1 !== null ? m.t1 : Date.now());
		}
		if (!isFinite(t0))
			t0 = gr.t || Date.now();
		if (t1 <= t0)
			t1 = t0 + 1000;
		const x0 = CHART_LEFT, x1 = W - 12, H = ms.length * CHART_H_ROW + 30;
		const X = (t) => x0 + (x1 - x0) * (t - t0) / (t1 - t0);
		const svg = s('svg', { class: 'chart-svg', width: W, height: H, viewBox: '0 0 ' + W + ' ' + H,
			role: 'img', 'aria-label': 'the members of a parallel group', 'data-testid': 'group-svg' });
		ms.forEach((m, i) => {
			const y = i * CHART_H_ROW;
			svg.appendChild(s('rect', { class: 'lane' + (i % 2 ? ' odd' : ''), x: 0, y: y, width: W, height: CHART_H_ROW }));
			svg.appendChild(s('text', { class: 'lane-label', x: x0 - 6, y: y + 15, 'text-anchor': 'end' },
				clip(m.stage, LANE_CHARS)));
			if (m.t0 === null)
				return;
			const end = m.t1 !== null ? m.t1 : Date.now();
			const xa = X(m.t0), w = Math.max(2, X(end) - xa);
			const st = m.status || (m.t1 === null ? 'running' : '');
			svg.appendChild(s('g', { class: 'span k-member v-' + st.replace(/[^a-z_]/g, ''),
				'data-testid': 'group-member', 'data-stage': m.stage, 'data-status': st },
				s('rect', { x: xa, y: y + 3, width: w, height: CHART_H_ROW - 6, rx: 3 }),
				w > 60 ? s('text', { class: 'span-label', x: xa + 4, y: y + 15 },
					st + ' \u00b7 ' + fmtDuration(end - m.t0)) : null,
				tip(m.stage + ': ' + (st || '?') + ' \u00b7 ' + fmtDuration(end - m.t0))));
		});
		timeAxis(svg, x0, x1, ms.length * CHART_H_ROW + 2, t0, t1);
		frag.appendChild(h('figure', { class: 'group-fig', 'data-testid': 'group-chart' },
			h('figcaption', { class: 'small muted' }, 'group ' + (gr.group !== undefined ? gr.group : gi + 1) +
				' \u00b7 ' + ms.length + ' members' + (gr.done ? '' : ' \u00b7 running')), svg));
	});
	box.replaceChildren(frag);
}

/* The run charts, at most every 500 ms (live events come in bursts). */
function runChartsSoon() {
	if (!rp.chartTimer)
		rp.chartTimer = setTimeout(renderRunCharts, 500);
}

function renderRunCharts() {
	clearTimeout(rp.chartTimer);
	rp.chartTimer = 0;
	if (view !== 'run' || !rp.run)
		return;
	rp.evs.sort((a, b) => (a.seq || 0) - (b.seq || 0));
	renderStages();
	renderUsage();
	renderGroups();
}

/* --- the charts page ---- */

const cp = { timer: 0, gen: 0, live: 0 };

function showCharts() {
	showView('charts');
	$('crumb').textContent = '';
	document.title = 'baton \u2014 charts';
	loadCharts();
	clearInterval(cp.timer);
	cp.timer = setInterval(() => {
		if (view === 'charts')
			loadCharts();
		else
			clearInterval(cp.timer);
	}, 60000);
}

/* A live message while the charts page is open: read again within 5 s. */
function chartsMessage() {
	if (view !== 'charts' || cp.live)
		return;
	cp.live = setTimeout(() => {
		cp.live = 0;
		if (view === 'charts')
			loadCharts();
	}, 5000);
}

async function loadCharts() {
	const gen = ++cp.gen;
	const hours = $('charts-hours').value || '6';
	let st, runs;
	try {
		[st, runs] = await Promise.all([
			api('/stats?hours=' + encodeURIComponent(hours) + '&days=14'),
			api('/runs?limit=50'),
		]);
	} catch (e) {
		if (gen === cp.gen)
			formMsg($('charts-msg'), 'Cannot load the charts: ' + errText(e), false);
		return;
	}
	if (gen !== cp.gen || view !== 'charts')
		return;
	show($('charts-msg'), false);
	renderQueue(st);
	renderThroughput(st);
	renderDays(st);
	renderRunsUsage(Array.isArray(runs && runs.runs) ? runs.runs : []);
}

function renderQueue(st) {
	const box = $('chart-queue');
	const q = Array.isArray(st && st.queue) ? st.queue : [];
	if (!q.length) {
		emptyChart(box, 'no data');
		return;
	}
	const step = (st.step_seconds || 60) * 1000;
	const t0 = q[0].t, t1 = q[q.length - 1].t + step;
	const W = chartWidth(box), x0 = 46, x1 = W - 12, top = 8, bot = 130, H = 150;
	let max = 0;
	for (const b of q)
		max = Math.max(max, b.queued || 0);
	const svg = s('svg', { class: 'chart-svg', width: W, height: H, viewBox: '0 0 ' + W + ' ' + H,
		role: 'img', 'aria-label': 'tasks queued over time', 'data-testid': 'queue-svg' });
	const vtop = valueAxis(svg, x0, x1, top, bot, Math.max(1, max), fmtShort, false);
	const X = (t) => x0 + (x1 - x0) * (t - t0) / (t1 - t0);
	const Y = (v) => bot - (bot - top) * v / vtop;
	/* a step line: the depth at the end of each bucket holds for the next */
	const pts = [X(t0) + ',' + Y(q[0].queued || 0)];
	for (const b of q) {
		pts.push(X(b.t) + ',' + Y(b.queued || 0));
		pts.push(X(b.t + step) + ',' + Y(b.queued || 0));
	}
	svg.appendChild(s('polygon', { class: 'queue-area', points: X(t0) + ',' + bot + ' ' + pts.join(' ') + ' ' + X(t1) + ',' + bot }));
	svg.appendChild(s('polyline', { class: 'queue-line', points: pts.join(' '), 'data-testid': 'queue-line',
		'data-buckets': q.length }, tip('tasks queued')));
	timeAxis(svg, x0, x1, bot, t0, t1);
	box.replaceChildren(svg);
	$('queue-sum').textContent = fmtInt(st.queued || 0) + ' queued now \u00b7 at most ' + fmtInt(max) +
		' in the last ' + st.hours + ' h \u00b7 ' + (st.step_seconds / 60) + ' min per step';
}

const SETTLED = [['done', 'done'], ['failed', 'failed'], ['blocked', 'blocked'], ['cancelled', 'cancelled']];

function renderThroughput(st) {
	const box = $('chart-throughput');
	const q = Array.isArray(st && st.queue) ? st.queue : [];
	if (!q.length) {
		emptyChart(box, 'no data');
		return;
	}
	const step = (st.step_seconds || 60) * 1000;
	const t0 = q[0].t, t1 = q[q.length - 1].t + step;
	const W = chartWidth(box), x0 = 46, x1 = W - 12, top = 8, bot = 130, H = 160;
	let max = 0, tot = { claimed: 0 };
	for (const b of q) {
		let n = 0;
		for (const [k] of SETTLED) {
			n += b[k] || 0;
			tot[k] = (tot[k] || 0) + (b[k] || 0);
		}
		tot.claimed += b.claimed || 0;
		max = Math.max(max, n, b.claimed || 0);
	}
	const svg = s('svg', { class: 'chart-svg', width: W, height: H, viewBox: '0 0 ' + W + ' ' + H,
		role: 'img', 'aria-label': 'tasks started and finished over time', 'data-testid': 'throughput-svg' });
	const vtop = valueAxis(svg, x0, x1, top, bot, Math.max(1, max), fmtShort, false);
	const X = (t) => x0 + (x1 - x0) * (t - t0) / (t1 - t0);
	const bw = Math.max(2.5, (x1 - x0) * step / (t1 - t0) - 1);
	const started = [];
	for (const b of q) {
		let y = bot;
		const n = SETTLED.reduce((a, [k]) => a + (b[k] || 0), 0);
		if (n) {
			const g = s('g', { class: 'bar', 'data-testid': 'throughput-bar', 'data-t': b.t, 'data-settled': n },
				tip(fmtClock(b.t) + ': ' + SETTLED.filter(([k]) => b[k]).map(([k, l]) => b[k] + ' ' + l).join(', ') +
					(b.claimed ? '; ' + b.claimed + ' started' : '')));
			for (const [k] of SETTLED) {
				const hh = (bot - top) * (b[k] || 0) / vtop;
				if (hh > 0) {
					y -= hh;
					g.appendChild(s('rect', { class: 'st-' + k, x: X(b.t), y: y, width: bw, height: hh }));
				}
			}
			svg.appendChild(g);
		}
		if (b.claimed)
			started.push(s('circle', { class: 'started-dot', cx: X(b.t) + bw / 2, cy: bot - (bot - top) * b.claimed / vtop,
				r: 3, 'data-testid': 'throughput-started' }, tip(fmtClock(b.t) + ': ' + b.claimed + ' started')));
	}
	for (const c of started)
		svg.appendChild(c);
	timeAxis(svg, x0, x1, bot, t0, t1);
	svg.appendChild(legend(x0, H - 4, [['st-done', 'done'], ['st-failed', 'failed'], ['st-blocked', 'blocked'],
		['st-cancelled', 'cancelled'], ['started-key', 'started']]));
	box.replaceChildren(svg);
	$('throughput-sum').textContent = tot.claimed + ' started \u00b7 ' +
		SETTLED.map(([k, l]) => (tot[k] || 0) + ' ' + l).join(' \u00b7 ');
}

function renderDays(st) {
	const box = $('chart-days');
	const days = Array.isArray(st && st.days) ? st.days : [];
	if (!days.length) {
		emptyChart(box, 'no data');
		return;
	}
	const W = chartWidth(box), x0 = 46, x1 = W - 56, top = 8, bot = 130, H = 165;
	let maxCost = 0, maxTok = 0, cost = 0, tok = 0;
	for (const d of days) {
		maxCost = Math.max(maxCost, d.cost_usd || 0);
		maxTok = Math.max(maxTok, (d.tokens_in || 0) + (d.tokens_out || 0));
		cost += d.cost_usd || 0;
		tok += (d.tokens_in || 0) + (d.tokens_out || 0);
	}
	const svg = s('svg', { class: 'chart-svg', width: W, height: H, viewBox: '0 0 ' + W + ' ' + H,
		role: 'img', 'aria-label': 'agent tokens and cost per day', 'data-testid': 'days-svg' });
	const ttop = valueAxis(svg, x0, x1, top, bot, Math.max(1, maxTok), fmtShort, false);
	const ctop = valueAxis(svg, x0, x1, top, bot, Math.max(0.01, maxCost), fmtUsd, true);
	const slot = (x1 - x0) / days.length;
	const bw = Math.max(2, slot * 0.6);
	const pts = [];
	days.forEach((d, i) => {
		const t = (d.tokens_in || 0) + (d.tokens_out || 0);
		const hh = (bot - top) * t / ttop;
		const x = x0 + slot * i + (slot - bw) / 2;
		svg.appendChild(s('g', { class: 'bar', 'data-testid': 'day-bar', 'data-day': d.day, 'data-tokens': t,
			'data-cost': d.cost_usd || 0 },
			s('rect', { class: 'tok-in', x: x, y: bot - hh, width: bw, height: hh }),
			tip(d.day + ': ' + fmtInt(d.calls || 0) + ' calls, ' + fmtInt(d.tokens_in || 0) + ' in, ' +
				fmtInt(d.tokens_out || 0) + ' out, ' + fmtCost(d.cost_usd || 0))));
		pts.push((x + bw / 2) + ',' + (bot - (bot - top) * (d.cost_usd || 0) / ctop));
		if (days.length <= 16 || i % Math.ceil(days.length / 12) === 0)
			svg.appendChild(s('text', { class: 'tick-label', x: x + bw / 2, y: bot + 15, 'text-anchor': 'middle' },
				String(d.day).slice(5)));
	});
	svg.appendChild(s('line', { class: 'axis', x1: x0, x2: x1, y1: bot, y2: bot }));
	svg.appendChild(s('polyline', { class: 'cost-line', points: pts.join(' '), 'data-testid': 'days-cost-line' },
		tip('cost per day')));
	svg.appendChild(legend(x0, H - 4, [['tok-in', 'tokens (UTC day)'], ['cost-key', 'cost']]));
	box.replaceChildren(svg);
	$('days-sum').textContent = 'last ' + days.length + ' days \u00b7 ' + fmtInt(tok) + ' tokens \u00b7 ' + fmtCost(cost);
}

/* The last runs' cost as bars, oldest on the left; a bar opens its run. */
function renderRunsUsage(runs) {
	const box = $('chart-runs');
	if (!runs.length) {
		emptyChart(box, 'no runs yet');
		return;
	}
	const list = runs.slice().reverse();
	const W = chartWidth(box), x0 = 46, x1 = W - 12, top = 8, bot = 120, H = 140;
	let max = 0;
	for (const r of list)
		max = Math.max(max, typeof r.cost_usd === 'number' ? r.cost_usd : 0);
	const svg = s('svg', { class: 'chart-svg', width: W, height: H, viewBox: '0 0 ' + W + ' ' + H,
		role: 'img', 'aria-label': 'cost per run', 'data-testid': 'runs-svg' });
	const vtop = valueAxis(svg, x0, x1, top, bot, Math.max(0.01, max), fmtUsd, false);
	const slot = (x1 - x0) / list.length;
	const bw = Math.max(2, Math.min(28, slot * 0.7));
	list.forEach((r, i) => {
		const c = typeof r.cost_usd === 'number' ? r.cost_usd : 0;
		const hh = Math.max(1, (bot - top) * c / vtop);
		const x = x0 + slot * i + (slot - bw) / 2;
		const a = s('a', { href: '#/runs/' + encodeURIComponent(String(r.id)), 'data-testid': 'run-bar',
			'data-run': String(r.id), 'data-cost': c },
			s('rect', { class: 'run-bar s-' + String(r.status || '').replace(/[^a-z_]/g, ''), x: x, y: bot - hh,
				width: bw, height: hh }),
			tip(String(r.id) + ' (' + String(r.status || '') + '): ' + fmtCost(c) +
				(r.task ? ' \u2014 ' + brief(String(r.task).split('\n')[0], 80) : '')));
		svg.appendChild(a);
	});
	svg.appendChild(s('line', { class: 'axis', x1: x0, x2: x1, y1: bot, y2: bot }));
	box.replaceChildren(svg);
}

$('charts-hours').addEventListener('change', () => loadCharts());
$('charts-refresh').addEventListener('click', () => loadCharts());
window.addEventListener('resize', () => {
	clearTimeout(cp.resize);
	cp.resize = setTimeout(() => {
		if (view === 'run')
			renderRunCharts();
		else if (view === 'charts')
			loadCharts();
	}, 200);
});

/* --- start -------------------------------------------------------------- */

token = sessionStorage.getItem(TOKEN_KEY) || '';
takeHashToken();
if (token)
	start();
else
	showLogin('');

/* Ages on cards drift: refresh them once a minute (text only). */
setInterval(() => {
	if (view !== 'board')
		return;
	for (const c of cards.values()) {
		const age = c.el.querySelector('.age');
		if (age)
			age.textContent = fmtAge(c.task.updated_at || c.task.created_at);
	}
}, 60000);

/* --- the chat panel (docs/chat.md) -------------------------------------- */

/*
 * One conversation at a time: its messages drawn as text by role, the
 * planner's reply streamed from .../stream (an EventSource closed at its
 * terminal event, so it does not reconnect), the mode buttons under a
 * mode_selection message.
 */
const chat = { id: 0, es: null, gen: 0 };

function chatError(msg) {
	$('chat-msg').textContent = msg || '';
	show($('chat-msg'), !!msg);
}

function chatStopStream() {
	if (chat.es) {
		chat.es.close();
		chat.es = null;
	}
	$('chat-live').textContent = '';
	show($('chat-live'), false);
}

async function showChat(id) {
	showView('chat');
	$('crumb').textContent = '';
	document.title = 'baton \u2014 chat';
	chatError('');
	if (!id) {
		try {
			const c = await api('/chat/conversations', { method: 'POST', json: {} });
			location.hash = '#/chat/' + c.id;
		} catch (e) {
			chatError('Cannot start a conversation: ' + errText(e));
		}
		return;
	}
	if (chat.id !== id)
		chatStopStream();
	chat.id = id;
	await chatLoad();
}

function chatModes(m, phase) {
	const row = h('div', { class: 'chat-modes', 'data-testid': 'chat-modes' });
	for (const o of m.options || []) {
		row.append(h('button', {
			type: 'button', 'data-testid': 'chat-mode-' + o.mode, title: o.about,
			disabled: !o.available || phase !== 'plan_proposal',
			onclick: () => chatStart(o.mode),
		}, o.label));
	}
	return row;
}

async function chatLoad() {
	const gen = ++chat.gen;
	let c;
	try {
		c = await api('/chat/conversations/' + chat.id);
	} catch (e) {
		chatError(errText(e));
		$('chat-log').replaceChildren();
		return;
	}
	if (gen !== chat.gen || view !== 'chat')
		return;
	$('chat-id').textContent = String(c.id);
	$('chat-phase').textContent = c.phase;
	const log = $('chat-log');
	log.replaceChildren();
	for (const m of c.messages) {
		const who = m.role === 'user' ? 'you' : m.role === 'assistant' ? 'planner' : 'baton';
		const item = h('div', { class: 'chat-item ' + m.role + ' ' + m.kind,
			'data-testid': 'chat-message', dataset: { role: m.role, kind: m.kind } },
		h('div', { class: 'small muted' }, who),
		h('pre', { class: 'chat-msg' }, m.content));
		if (m.kind === 'mode_selection')
			item.append(chatModes(m, c.phase));
		log.append(item);
	}
	const closed = c.phase === 'execution' || c.phase === 'monitoring';
	$('chat-input').disabled = closed || c.replying;
	$('chat-send').disabled = closed || c.replying;
	if (c.replying && !chat.es)
		chatFollow();
	if (c.phase === 'monitoring')
		setTimeout(() => { if (view === 'chat' && gen === chat.gen) chatLoad(); }, 3000);
}

function chatFollow() {
	chatStopStream();
	const q = new URLSearchParams({ access_token: token });
	const es = new EventSource(API + '/chat/conversations/' + chat.id + '/stream?' + q.toString());
	chat.es = es;
	show($('chat-live'), true);
	es.addEventListener('chunk', (ev) => {
		try {
			$('chat-live').textContent += JSON.parse(ev.data).text;
		} catch (e) {
			/* a broken event: skip it */
		}
	});
	const end = (ev) => {
		if (ev && ev.type === 'error' && ev.data) {
			try {
				chatError(JSON.parse(ev.data).message);
			} catch (e) {
				/* not ours */
			}
		}
		if (chat.es === es)
			chatStopStream();
		chatLoad();
	};
	es.addEventListener('done', end);
	es.addEventListener('error', end);
}

async function chatStart(mode) {
	chatError('');
	try {
		await api('/chat/conversations/' + chat.id + '/start-execution', { json: { mode: mode } });
	} catch (e) {
		chatError(errText(e));
	}
	chatLoad();
}

$('chat-form').addEventListener('submit', async (ev) => {
	ev.preventDefault();
	const text = $('chat-input').value;
	if (!text.trim() || !chat.id)
		return;
	chatError('');
	try {
		await api('/chat/conversations/' + chat.id + '/messages', { json: { content: text } });
	} catch (e) {
		chatError(errText(e));
		return;
	}
	$('chat-input').value = '';
	await chatLoad();
	chatFollow();
});

$('chat-new').addEventListener('click', () => {
	chatStopStream();
	chat.id = 0;
	if (location.hash === '#/chat')
		showChat(0);
	else
		location.hash = '#/chat';
});

})();
