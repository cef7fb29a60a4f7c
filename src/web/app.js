// transcript-sync's web view: search as you type, conversations and the sessions beside them
// loaded as they scroll into view, live records from the daemon, copy buttons, the keys
// (Ctrl-K, j/k and the rest), links to a message, the theme. Everything it inserts is HTML
// this server made (and escaped); text from elsewhere is only ever set as textContent.
"use strict";

// The HTML at `url`; a failure is an Error saying what the server said.
function fetchHtml(url) {
  return fetch(url, { credentials: "same-origin" }).then((r) => r.text().then((body) => {
    if (r.ok) return body;
    const page = new DOMParser().parseFromString(body, "text/html");
    const why = page.querySelector(".error");
    throw new Error("HTTP " + r.status + (why ? ": " + why.textContent : ""));
  }));
}

// Replaces `marker` with the HTML at its data-src; on a failure it says why, and a click
// tries again.
function load(marker, where) {
  if (marker.dataset.loading) return;
  marker.dataset.loading = "1";
  fetchHtml(marker.dataset.src).then((html) => {
    marker.insertAdjacentHTML(where || "beforebegin", html);
    marker.remove();
    setup();
  }, (e) => {
    marker.textContent = "Could not load (" + e.message + "). Click to try again.";
    delete marker.dataset.loading;
    marker.addEventListener("click", () => load(marker, where), { once: true });
  });
}

// What loads each marker it is given as the marker comes within `margin` of `root` (the
// window when null).
function loader(root, margin) {
  const observer = new IntersectionObserver((entries) => {
    for (const e of entries) {
      if (e.isIntersecting) {
        observer.unobserve(e.target);
        load(e.target);
      }
    }
  }, { root: root, rootMargin: margin });
  return observer;
}
const seen = loader(null, "800px");
// The list beside a conversation scrolls in a pane of its own.
const listPane = document.getElementById("list-pane");
const paneSeen = listPane && loader(listPane, "400px");

function liveState(el, text) {
  let state = document.getElementById("live-state");
  if (!state) {
    state = document.createElement("p");
    state.id = "live-state";
    state.className = "live-state";
    const conv = document.getElementById("conversation");
    if (conv) conv.parentNode.insertBefore(state, conv);
  }
  state.textContent = text;
}

// Follows the records the daemon archives, through the server's event stream. A hidden
// page lets its stream go (a browser holds a few connections per server) and takes it up
// again from the last record it has when shown.
function follow(el) {
  let last = null;
  let feed = null;
  const open = () => {
    const url = new URL(el.dataset.live, location.href);
    if (last !== null) url.searchParams.set("since", last);
    feed = new EventSource(url);
    listen(el, feed, (id) => { last = id; });
  };
  document.addEventListener("visibilitychange", () => {
    if (document.hidden && feed) { feed.close(); feed = null; }
    else if (!document.hidden && !feed) open();
  });
  window.addEventListener("pagehide", () => { if (feed) feed.close(); });
  open();
}

function listen(el, feed, seen) {
  const conversation = el.classList.contains("live-here");
  feed.onerror = () => {
    liveState(el, feed.readyState === EventSource.CLOSED
      ? "Not live: the server refused or stopped; reload the page."
      : "Not live: the connection to the server was lost; trying again…");
  };
  feed.addEventListener("seq", (e) => seen(e.lastEventId));
  feed.addEventListener("daemon", (e) => {
    liveState(el, e.data === "up" ? "Live: new messages appear as they are archived." : e.data);
  });
  feed.addEventListener("caught-up", () => {
    liveState(el, "Live: new messages appear as they are archived.");
  });
  feed.addEventListener("refused", (e) => {
    liveState(el, "Not live: " + e.data);
    feed.close();
  });
  feed.addEventListener("record", (e) => {
    seen(e.lastEventId);
    if (e.lastEventId && document.getElementById("m-" + e.lastEventId)) return;
    const atEnd = window.innerHeight + window.scrollY >= document.body.scrollHeight - 80;
    if (conversation) {
      const made = document.createElement("template");
      made.innerHTML = e.data;
      const added = made.content.firstElementChild;
      if (!added) return;
      // A message the page has already: an upsert replaces it where it is, a copy is
      // passed over (as the index keeps them).
      const key = added.dataset.key;
      const shown = key && el.parentNode.querySelector("article[data-key=\"" + CSS.escape(key) + "\"]");
      if (shown && !added.dataset.upsert) return;
      for (const old of document.querySelectorAll(".live-new")) old.classList.remove("live-new");
      if (shown) shown.replaceWith(added);
      else el.parentNode.insertBefore(added, el);
      added.classList.add("live-new");
      // Kept in view when the reader was at the end and the message is the last one.
      if (atEnd && added.nextElementSibling === el) added.scrollIntoView({ block: "end" });
    } else {
      el.insertAdjacentHTML("afterbegin", e.data);
      while (el.children.length > 500) el.lastElementChild.remove();
    }
  });
}

function setup() {
  for (const m of document.querySelectorAll(".more[data-src]:not([data-watched])")) {
    m.dataset.watched = "1";
    seen.observe(m);
  }
  for (const m of document.querySelectorAll("li.more-rows[data-src]:not([data-watched])")) {
    m.dataset.watched = "1";
    if (paneSeen) paneSeen.observe(m);
  }
  for (const m of document.querySelectorAll(".earlier[data-src]:not([data-watched])")) {
    m.dataset.watched = "1";
    m.querySelector("button").addEventListener("click", () => load(m, "afterend"));
  }
  // A subagent's conversation, loaded into its fold the first time it is opened.
  for (const d of document.querySelectorAll("details.subagent[data-src]:not([data-watched])")) {
    d.dataset.watched = "1";
    d.addEventListener("toggle", () => {
      if (!d.open || d.dataset.loaded) return;
      d.dataset.loaded = "1";
      const marker = document.createElement("div");
      marker.className = "more";
      marker.dataset.src = d.dataset.src;
      marker.textContent = "Loading…";
      d.appendChild(marker);
      load(marker);
    });
  }
  // The page's own conversation follows live; a subagent's, read in its fold, does not (a
  // browser holds a few connections to a server, and every fold would take one).
  for (const el of document.querySelectorAll("[data-live]:not([data-following])")) {
    el.dataset.following = "1";
    if (!el.closest("details.subagent")) follow(el);
  }
  for (const b of document.querySelectorAll("button[data-copy]:not([data-watched])")) {
    b.dataset.watched = "1";
    b.addEventListener("click", () => copy(b));
  }
}

function copy(button) {
  const text = document.getElementById(button.dataset.copy).textContent;
  const done = () => { button.textContent = "Copied"; };
  if (navigator.clipboard && window.isSecureContext) {
    navigator.clipboard.writeText(text).then(done, () => select(button));
  } else {
    select(button);
  }
}

// Where the clipboard cannot be written: the text selected, for Ctrl-C.
function select(button) {
  const range = document.createRange();
  range.selectNodeContents(document.getElementById(button.dataset.copy));
  const sel = window.getSelection();
  sel.removeAllRanges();
  sel.addRange(range);
  button.textContent = "Selected: Ctrl-C";
}

function searchAsYouType() {
  const input = document.getElementById("search");
  const results = document.getElementById("results");
  if (!input || !results) return;
  let timer = null;
  let asked = 0;
  input.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(() => {
      const q = input.value;
      const n = ++asked;
      const url = "/search?fragment=1&q=" + encodeURIComponent(q);
      fetchHtml(url).then((html) => {
        if (n !== asked) return; // a later search is on its way
        results.innerHTML = html;
        history.replaceState(null, "", "/search?q=" + encodeURIComponent(q));
      }, (e) => { results.textContent = e.message; });
    }, 150);
  });
  const end = input.value.length;
  input.setSelectionRange(end, end);
}

// The sessions list found as one types in its box: the list's part the server makes for the
// form's fields (the form's data-found) put in place of the parts with the same ids, and the
// address given the box's text, so that a reload or a link keeps it. A count that a screen
// reader follows (role=status) is changed in place, so that it says the new one.
function findAsYouType() {
  const input = document.getElementById("list-q");
  if (!input) return;
  const form = input.form;
  let timer = null;
  let asked = 0;
  const find = () => {
    const url = new URL(form.dataset.found, location.href);
    for (const [name, value] of new FormData(form)) {
      if (value !== "") url.searchParams.set(name, value);
    }
    const n = ++asked;
    fetchHtml(url.pathname + url.search).then((html) => {
      if (n !== asked) return; // a later search is on its way
      const made = document.createElement("template");
      made.innerHTML = html;
      for (const part of [...made.content.children]) {
        const old = part.id && document.getElementById(part.id);
        if (!old) continue;
        if (old.getAttribute("role") === "status") old.textContent = part.textContent;
        else old.replaceWith(part);
      }
      setup();
      const here = new URL(location.href);
      here.searchParams.delete("page");
      if (input.value.trim()) here.searchParams.set("q", input.value);
      else here.searchParams.delete("q");
      history.replaceState(null, "", here.pathname + here.search + here.hash);
    }, (e) => {
      const count = document.getElementById("list-count");
      if (count) count.textContent = e.message;
    });
  };
  input.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(find, 150);
  });
  // Enter in the box finds at once, where it is (beside a conversation, sending the form
  // would leave it for the sessions page); the form's button still sends the form.
  input.addEventListener("keydown", (e) => {
    if (e.key !== "Enter") return;
    e.preventDefault();
    clearTimeout(timer);
    find();
  });
}

// The theme: the system's, until the toggle chooses one, which this browser remembers.
function theme() {
  const root = document.documentElement;
  const saved = localStorage.getItem("theme");
  if (saved === "light" || saved === "dark") root.dataset.theme = saved;
  const toggle = document.getElementById("theme");
  if (!toggle) return;
  toggle.addEventListener("click", () => {
    const dark = root.dataset.theme
      ? root.dataset.theme === "dark"
      : matchMedia("(prefers-color-scheme: dark)").matches;
    root.dataset.theme = dark ? "light" : "dark";
    localStorage.setItem("theme", root.dataset.theme);
  });
}
theme();

// The box that finds sessions in the list, where it is shown.
function findBox() {
  const box = document.getElementById("list-q");
  if (box && shown(box)) { box.focus(); box.select(); }
}

function searchBox() {
  const box = document.getElementById("search") || document.getElementById("quick");
  if (box) { box.focus(); box.select(); }
}

// The keys (the dialog `?` opens lists them). j and k move in one of two places: the
// sessions of the list, or the messages of the conversation. Which one is where the focus
// is, else where the last click or move was, else the conversation when the page has one.
// The choice is shown by an outline and takes the focus, so a screen reader says it.
const keys = { place: null, g: 0 };

function shown(el) { return el.getClientRects().length > 0; }

function items(place) {
  const css = place === "list"
    ? "a.session"
    : "#conversation > article.msg, #conversation > .compact";
  return [...document.querySelectorAll(css)].filter(shown);
}

function placeOf(el) {
  if (!el || !el.closest) return null;
  if (el.closest(".list-pane, table.sessions")) return "list";
  if (el.closest("#conversation")) return "conversation";
  return null;
}

function place() {
  const here = placeOf(document.activeElement) || keys.place;
  if (here && items(here).length) return here;
  return items("conversation").length ? "conversation" : "list";
}

// Where a place's selection starts: the open session in the list; in the conversation the
// message a link named, else the first one in view.
function start(place, all) {
  if (place === "list") {
    const open = all.findIndex((a) => a.getAttribute("aria-current"));
    return open >= 0 ? open : 0;
  }
  const target = all.findIndex((m) => location.hash === "#" + m.id);
  if (target >= 0) return target;
  const inView = all.findIndex((m) => m.getBoundingClientRect().bottom > 80);
  return inView >= 0 ? inView : 0;
}

function choose(place, el) {
  for (const old of document.querySelectorAll(".selected")) {
    if (placeOf(old) === place) old.classList.remove("selected");
  }
  el.classList.add("selected");
  el.focus({ preventScroll: true });
  el.scrollIntoView({ block: "nearest" });
  keys.place = place;
}

// Moves the selection of `place` by `step` (0: to where it is, or starts).
function move(place, step) {
  const all = items(place);
  if (!all.length) return;
  const at = all.findIndex((el) => el.classList.contains("selected"));
  const to = at < 0 ? start(place, all) : Math.max(0, Math.min(all.length - 1, at + step));
  choose(place, all[to]);
}

function typing(el) {
  return el && (el.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(el.tagName));
}

function onKey(e) {
  if (e.ctrlKey || e.metaKey) {
    if (e.key === "k") { e.preventDefault(); searchBox(); }
    return;
  }
  if (e.altKey || e.defaultPrevented || typing(e.target)) return;
  const dialog = document.getElementById("keys");
  if (e.key === "?" && dialog) {
    e.preventDefault();
    if (dialog.open) dialog.close(); else dialog.showModal();
    return;
  }
  if (dialog && dialog.open) return;
  const afterG = keys.g && Date.now() - keys.g < 1500;
  keys.g = 0;
  switch (e.key) {
    case "j": move(place(), 1); break;
    case "k": move(place(), -1); break;
    case "h": move("list", 0); break;
    case "l": move("conversation", 0); break;
    case "/": searchBox(); break;
    case "f": findBox(); break;
    case "g": keys.g = Date.now(); break;
    case "d": if (afterG) location.href = "/"; else return; break;
    default: return;
  }
  e.preventDefault();
}
document.addEventListener("keydown", onKey);
// A click chooses the place j and k move in.
document.addEventListener("mousedown", (e) => { keys.place = placeOf(e.target) || keys.place; });

// A message a link names (`#m-SEQ`): shown and chosen; not in this part of the conversation,
// the page is asked again from it (`?at=SEQ`, which the server opens at that message).
function toMessage() {
  const named = /^#m-(\d+)$/.exec(location.hash);
  if (!named) return;
  const el = document.getElementById("m-" + named[1]);
  const url = new URL(location.href);
  if (el) {
    choose("conversation", el);
    el.scrollIntoView({ block: "center" });
  } else if (document.getElementById("conversation") && url.searchParams.get("at") !== named[1]) {
    location.replace(messageUrl(named[1]));
  }
}

// The address of message `seq` of this session, which opens at it.
function messageUrl(seq) {
  const url = new URL(location.href);
  url.searchParams.set("at", seq);
  url.searchParams.delete("from");
  url.hash = "m-" + seq;
  return url.href;
}
window.addEventListener("hashchange", toMessage);

// A message's link (its `#`) goes to it, and puts its address on the clipboard.
document.addEventListener("click", (e) => {
  const anchor = e.target.closest && e.target.closest("#conversation a.anchor");
  if (!anchor || !navigator.clipboard || !window.isSecureContext) return;
  navigator.clipboard.writeText(messageUrl(anchor.hash.slice(3))).then(() => {
    for (const a of document.querySelectorAll("a.anchor[data-copied]")) delete a.dataset.copied;
    anchor.dataset.copied = "1";
  }, () => {});
});

// The open session, in view in the list beside it.
function showOpen() {
  const open = listPane && listPane.querySelector("a.session[aria-current]");
  if (!open || !shown(open)) return;
  const top = open.getBoundingClientRect().top - listPane.getBoundingClientRect().top;
  if (top < 0 || top + open.offsetHeight > listPane.clientHeight) {
    listPane.scrollTop += top - listPane.clientHeight / 3;
  }
}

document.addEventListener("DOMContentLoaded", () => {
  setup();
  searchAsYouType();
  findAsYouType();
  showOpen();
  const button = document.getElementById("keys-button");
  if (button) button.addEventListener("click", () => document.getElementById("keys").showModal());
  toMessage();
});
