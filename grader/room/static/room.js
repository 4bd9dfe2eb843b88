// What both pages share: the API with the token in a header, building DOM from text only
// (never innerHTML: every string may come from the candidate), live updates, the clock.
"use strict";
const TOKEN = document.querySelector('meta[name="kvgrade-token"]').content;
const ROLE = document.body.dataset.role;
const SAVE_DELAY_MS = 600;  // an edit snapshot once typing pauses

async function api(method, path, body) {
  const response = await fetch(`/api/${ROLE}/${path}`, {
    method, headers: {"X-Kvgrade-Token": TOKEN, "Content-Type": "application/json"},
    body: body === undefined ? undefined : JSON.stringify(body), cache: "no-store"});
  const data = await response.json().catch(() => ({error: `the server answered ${response.status}`}));
  if (!response.ok) throw new Error(data.error || `the server answered ${response.status}`);
  return data;
}

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "class") node.className = value;
    else if (key.startsWith("data-")) node.setAttribute(key, value);
    else node[key] = value;
  }
  for (const child of children.flat()) {
    if (child !== null && child !== undefined) node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

function say(text, bad = false) {
  const status = document.getElementById("status");
  status.textContent = text;
  status.classList.toggle("bad", bad);
}

// Fetch this side's state now and whenever the server says something changed.
function follow(render) {
  let busy = false, again = false;
  async function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    try { render(await api("GET", "state")); } catch (err) { say(err.message, true); }
    busy = false;
    if (again) { again = false; refresh(); }
  }
  const events = new EventSource(`/api/${ROLE}/events?token=${encodeURIComponent(TOKEN)}`);
  events.onmessage = refresh;
  events.onerror = () => say("reconnecting to the server...", true);
  events.onopen = () => say("");
  return refresh;
}

// The time box, counted down from what the server said at the last fetch.
const clock = {left: null, at: 0, ended: false};
function setClock(state) {
  Object.assign(clock, {left: state.remaining_seconds, at: performance.now(), ended: state.ended});
  tick();
}
function tick() {
  if (clock.left === null) return;
  const left = clock.ended ? clock.left : clock.left - (performance.now() - clock.at) / 1000;
  const whole = Math.abs(Math.trunc(left)), text = `${Math.floor(whole / 60)}:${String(whole % 60).padStart(2, "0")}`;
  const node = document.getElementById("clock");
  node.textContent = clock.ended ? `ended, ${text} ${left < 0 ? "over" : "left"}`
                                  : left < 0 ? `${text} over time` : `${text} left`;
  node.classList.toggle("over", left < 0);
}
setInterval(tick, 1000);

// A debounced saver per key: save(key, text) waits for a pause; flush() saves now.
function saver(store) {
  const timers = new Map(), pending = new Map();
  async function send(key) {
    clearTimeout(timers.get(key));
    timers.delete(key);
    if (!pending.has(key)) return;
    const text = pending.get(key);
    pending.delete(key);
    try { await store(key, text); say("saved"); } catch (err) { say(err.message, true); }
  }
  return {
    save(key, text) {
      pending.set(key, text);
      clearTimeout(timers.get(key));
      timers.set(key, setTimeout(() => send(key), SAVE_DELAY_MS));
    },
    pending: (key) => pending.has(key),
    flush: () => Promise.all([...pending.keys()].map(send)),
  };
}

function clockTime(iso) {
  return new Date(iso).toLocaleTimeString([], {hour: "2-digit", minute: "2-digit", second: "2-digit"});
}
