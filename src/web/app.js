// transcript-sync's web view: search as you type, conversations loaded as they scroll into
// view, live records from the daemon, copy buttons, Ctrl-K, the theme. Everything it inserts is HTML
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

const seen = new IntersectionObserver((entries) => {
  for (const e of entries) {
    if (e.isIntersecting) {
      seen.unobserve(e.target);
      load(e.target);
    }
  }
}, { rootMargin: "800px" });

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

document.addEventListener("keydown", (e) => {
  if ((e.ctrlKey || e.metaKey) && e.key === "k") {
    e.preventDefault();
    const box = document.getElementById("search") || document.getElementById("quick");
    if (box) { box.focus(); box.select(); }
  }
});

document.addEventListener("DOMContentLoaded", () => {
  setup();
  searchAsYouType();
  const hash = location.hash && document.getElementById(location.hash.slice(1));
  if (hash) hash.scrollIntoView({ block: "center" });
});
