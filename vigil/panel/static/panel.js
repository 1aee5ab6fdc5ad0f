// vigil panel: renders the queue and a conversation from the page's JSON, keeps them live over server-sent events,
// and sends the analyst's verdicts and a lead's decisions on knowledge. Every piece of text goes in with textContent: nothing typed by a customer (or
// anyone) is ever parsed as HTML.
"use strict";

(() => {
  const csrf = document.querySelector('meta[name="csrf-token"]')?.content || "";
  const page = document.body.dataset.page;
  const dataNode = document.getElementById("vigil-data");
  const initial = dataNode ? JSON.parse(dataNode.textContent) : null;
  const KIND_LABELS = {
    answer: "Suggested answer",
    next_step: "Next step",
    follow_up: "Follow-up",
    handover: "Handover brief",
    escalation: "Escalation",
    action: "Action",
  };
  const KNOWLEDGE_KINDS = new Set(["faq", "article", "document", "case"]);
  const VERDICT_LABELS = {
    accepted: "Accepted", edited: "Edited and accepted", dismissed: "Dismissed", approved: "Approved", rejected: "Rejected",
  };

  function el(tag, attrs = {}, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs)) {
      if (value === null || value === undefined || value === false) continue;
      if (name === "class") node.className = value;
      else if (name === "text") node.textContent = value;
      else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
      else node.setAttribute(name, value === true ? "" : String(value));
    }
    for (const child of children) {
      if (child === null || child === undefined) continue;
      node.append(typeof child === "string" ? document.createTextNode(child) : child);
    }
    return node;
  }

  function ago(iso) {
    if (!iso) return "—";
    const seconds = Math.max(0, Math.round((Date.now() - Date.parse(iso)) / 1000));
    if (seconds < 60) return `${seconds}s`;
    const minutes = Math.floor(seconds / 60);
    if (minutes < 60) return `${minutes}m ${seconds % 60}s`;
    const hours = Math.floor(minutes / 60);
    return hours < 48 ? `${hours}h ${minutes % 60}m` : `${Math.floor(hours / 24)}d`;
  }

  function label(value) {
    return value ? value.replace(/_/g, " ") : "—";
  }

  // A machine name for people, as vigil/panel/progress.py words_of: "ask_new_address" -> "Ask new address".
  function words(name) {
    const spaced = (name || "").replace(/[_-]/g, " ").trim();
    return spaced.charAt(0).toUpperCase() + spaced.slice(1);
  }

  // A case's state in words, as vigil/panel/progress.py STATE_WORDS says it on the server.
  const STATE_LABELS = {
    new: "New, not answered yet",
    waiting_on_analyst: "Waiting on the analyst",
    waiting_on_customer: "Waiting on the customer",
    waiting_on_internal: "Waiting on another team",
    resolved: "Resolved",
    closed: "Closed",
  };

  // A clock's name, as vigil/panel/progress.py CLOCK_NAMES says it on the server.
  const CLOCK_NAMES = {
    first_response: "First response",
    next_response: "Next response",
    resolution: "Resolution",
    commitment: "Promise",
  };

  // A countdown as the server writes it (vigil/panel/progress.py duration): "45s", "4m 05s", "2h 05m", "3d 4h".
  function span(seconds) {
    const s = Math.floor(seconds);
    const two = (n) => String(n).padStart(2, "0");
    if (s < 60) return `${s}s`;
    if (s < 3600) return `${Math.floor(s / 60)}m ${two(s % 60)}s`;
    if (s < 48 * 3600) return `${Math.floor(s / 3600)}h ${two(Math.floor(s / 60) % 60)}m`;
    return `${Math.floor(s / 86400)}d ${Math.floor(s / 3600) % 24}h`;
  }

  // Every countdown under root, at this second: the time left, or how long overdue; data-phase is "warn" from its
  // data-warn time (the warning window), "overdue" once due.
  function tickCountdowns(root) {
    const now = Date.now();
    for (const node of root.querySelectorAll(".countdown[data-due]")) {
      const left = (Date.parse(node.dataset.due) - now) / 1000;
      const warn = node.dataset.warn ? Date.parse(node.dataset.warn) : null;
      node.dataset.phase = left <= 0 ? "overdue" : warn !== null && now >= warn ? "warn" : "ok";
      node.textContent = left <= 0 ? `overdue by ${span(-left)}` : `${span(left)} left`;
    }
  }

  // Times are written as the tenant reads them, in its locale (en-GB: 14:05; en-US: 2:05 PM) and time zone: the
  // page's display is on <body data-locale data-time-zone>; in the queue each row is its tenant's (vigil-displays).
  const displaysNode = document.getElementById("vigil-displays");
  const displays = displaysNode ? JSON.parse(displaysNode.textContent) : { default: null, tenants: {} };
  const pageDisplay = { locale: document.body.dataset.locale || "en-GB", time_zone: document.body.dataset.timeZone || "UTC" };
  const TIME_FORMATS = {
    clock: { hour: "numeric", minute: "2-digit" },
    stamp: { year: "numeric", month: "short", day: "numeric", hour: "numeric", minute: "2-digit", timeZoneName: "short" },
  };
  const formats = new Map();

  function formatter(display, kind) {
    const key = `${display.locale}|${display.time_zone}|${kind}`;
    if (!formats.has(key)) {
      let format;
      try {
        format = new Intl.DateTimeFormat(display.locale, { ...TIME_FORMATS[kind], timeZone: display.time_zone });
      } catch (_) {  // a tag or zone this browser does not know (the server checked both): UTC, 24-hour
        format = new Intl.DateTimeFormat("en-GB", { ...TIME_FORMATS[kind], timeZone: "UTC" });
      }
      formats.set(key, format);
    }
    return formats.get(key);
  }

  function displayOf(tenant) {
    return displays.tenants[tenant] || displays.default || pageDisplay;
  }

  function clock(iso, display = pageDisplay) {
    return iso ? formatter(display, "clock").format(new Date(iso)) : "";
  }

  function stamp(iso, display = pageDisplay) {
    return iso ? formatter(display, "stamp").format(new Date(iso)) : "";
  }

  // Live updates: one EventSource; after a reconnection the page reloads its state from the API.
  function live(url, handlers, resync) {
    const status = document.getElementById("live-status");
    let connectedOnce = false;
    const source = new EventSource(url);
    source.addEventListener("hello", () => {
      if (status) {
        status.textContent = "Live";
        status.className = "live on";
      }
      document.body.dataset.live = "on";
      if (connectedOnce && resync) resync();
      connectedOnce = true;
    });
    source.addEventListener("error", () => {
      // The browser retries by itself unless the server refused the stream (a sign-in that ended, say).
      const closed = source.readyState === EventSource.CLOSED;
      if (status) {
        status.textContent = closed ? "Offline: reload the page" : "Reconnecting…";
        status.className = "live off";
      }
      document.body.dataset.live = "off";
    });
    for (const [kind, handle] of Object.entries(handlers)) {
      source.addEventListener(kind, (event) => handle(JSON.parse(event.data)));
    }
    return source;
  }

  async function api(method, path, body) {
    const response = await fetch(path, {
      method,
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf, Accept: "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (!response.ok) {
      let detail = response.statusText;
      try {
        detail = (await response.json()).detail || detail;
      } catch (_) {
        /* not JSON */
      }
      throw new Error(typeof detail === "string" ? detail : JSON.stringify(detail));
    }
    return response.status === 204 ? null : response.json();
  }

  // ---- the queue -------------------------------------------------------------------------------------------
  const PREVIEW_CHARS = 140;  // as vigil/store.py cuts the last message for the queue
  const ROLE_LABELS = { customer: "Customer", analyst: "Analyst", bot: "Bot", system: "System" };

  // The start of a text for a queue row, as the store makes it: whitespace run together, cut between characters
  // (code points: a cut never splits an emoji's surrogate pair), "…" when it was cut.
  function preview(text) {
    const chars = Array.from(text || "");
    const start = chars.slice(0, PREVIEW_CHARS).join("").split(/\s+/).filter(Boolean).join(" ");
    return chars.length > PREVIEW_CHARS ? `${start}…` : start;
  }

  // Each update touches one row: it is rebuilt and moved to its place; the clock only rewrites the time texts.
  function queuePage(items) {
    const body = document.querySelector("#queue tbody");
    const empty = document.getElementById("queue-empty");
    const rows = new Map();

    // As the server sorts the queue (vigil/cases/views.py): those in breach first (the longest in breach first),
    // then what falls due first (nothing due last), then waiting longest, then the most recently active.
    function before(a, b) {
      const ba = breachedAt(a), bb = breachedAt(b);
      if (ba !== null && bb !== null && ba !== bb) return ba < bb;
      if ((ba === null) !== (bb === null)) return ba !== null;
      const da = a.next_due_at ? Date.parse(a.next_due_at) : null, db = b.next_due_at ? Date.parse(b.next_due_at) : null;
      if (da !== null && db !== null && da !== db) return da < db;
      if ((da === null) !== (db === null)) return da !== null;
      const wa = a.waiting_since, wb = b.waiting_since;
      if (wa && wb) return Date.parse(wa) < Date.parse(wb);
      if (wa || wb) return Boolean(wa);
      return Date.parse(a.updated_at) > Date.parse(b.updated_at);
    }

    function breachedAt(item) {
      return item.breaches && item.breaches.length ? Date.parse(item.breaches[0].due_at) : null;
    }

    function place(row) {
      let next = body.firstElementChild;
      while (next && (next === row || before(next.state, row.state))) next = next.nextElementSibling;
      if (row.nextElementSibling !== next || row.parentNode !== body) body.insertBefore(row, next);
    }

    function upsert(item, flash) {
      let row = rows.get(item.conversation_id);
      if (item.status === "closed") {
        row?.remove();
        rows.delete(item.conversation_id);
      } else {
        if (!row) {
          row = el("tr", { "data-conversation-id": item.conversation_id });
          row.state = {};
          row.unread = new Set();
          rows.set(item.conversation_id, row);
        }
        Object.assign(row.state, item);
        if (item.unread_suggestions) row.unread = new Set(item.unread_suggestions);
        render(row);
        place(row);
        if (flash) highlight(row);
      }
      empty.hidden = rows.size > 0;
    }

    function highlight(row) {
      if (!window.matchMedia("(prefers-reduced-motion: reduce)").matches && row.animate) {
        row.animate([{ backgroundColor: "#fef3c7" }, { backgroundColor: "transparent" }], { duration: 1200 });
      }
    }

    function render(row) {
      const s = row.state;
      const href = `/panel/conversations/${encodeURIComponent(s.conversation_id)}`;
      const unread = row.unread.size;
      const last = s.last_message;
      row.className = [s.waiting_since ? "waiting" : "", s.breaches && s.breaches.length ? "breached" : ""].join(" ").trim();
      row.waited = el("td", { class: "waited" });
      const sent = last ? el("time", { datetime: last.sent_at, title: stamp(last.sent_at, displayOf(s.tenant)) }) : "—";
      row.aged = el("td", { class: "age" }, sent);
      const status = s.state ? s.state.status : null;
      // In breach: the clock passed is named and counts how long overdue; otherwise what falls due next.
      const breach = s.breaches && s.breaches.length ? s.breaches[0] : null;
      const due = breach
        ? el("span", { class: "breach" },
          el("span", { class: "badge breach", text: `${CLOCK_NAMES[breach.kind] || label(breach.kind)} breached` }), " ",
          el("span", { class: "countdown", "data-due": breach.due_at, title: `Was due ${stamp(breach.due_at, displayOf(s.tenant))}` }))
        : s.next_due_at
          ? el("span", { class: "countdown", "data-due": s.next_due_at, title: stamp(s.next_due_at, displayOf(s.tenant)) })
          : "—";
      row.replaceChildren(
        el("th", { scope: "row", class: "customer" },
          // The customer's name leads; without one, the conversation id, as the analyst knows it from elsewhere.
          el("a", { href, class: s.customer_name ? "name" : "name mono", text: s.customer_name || s.conversation_id }),
          s.customer_name ? el("span", { class: "id mono", text: s.conversation_id }) : null,
          last ? el("span", { class: "preview" },
            el("span", { class: `from ${last.role}`, text: `${ROLE_LABELS[last.role] || last.role}: ` }), last.text) : null),
        row.aged,
        row.waited,
        el("td", { class: s.priority ? `priority ${s.priority}` : "priority", text: label(s.priority) }),
        el("td", { class: "assignee", text: s.assignee || "unassigned" }),
        el("td", { class: "state", "data-state": status, title: `Status: ${label(s.status)}`, text: STATE_LABELS[status] || label(status) }),
        el("td", { class: "due" }, due),
        el("td", { text: s.tenant }),
        el("td", {}, el("span", { class: unread ? "badge hot" : "badge", text: String(unread), "aria-label": `${unread} unread suggestions` })),
      );
      tick(row);
    }

    function tick(row) {
      const s = row.state;
      row.waited.textContent = s.waiting_since ? ago(s.waiting_since) : "—";
      const time = row.aged.firstElementChild;
      if (time) time.textContent = `${ago(s.last_message.sent_at)} ago`;
      tickCountdowns(row);
    }

    // A live message carries its whole text: the row shows its start, and the customer's name if it gives one.
    function said(d) {
      const m = d.message;
      const item = { ...d.case, last_message: { role: m.role, text: preview(m.text), sent_at: m.sent_at } };
      if (m.role === "customer" && m.author) item.customer_name = m.author;
      upsert(item, true);
    }

    // A new suggestion is unread until this analyst opens the conversation; a verdict by anyone settles it.
    function unread(conversationId, suggestionId, isNew) {
      const row = rows.get(conversationId);
      if (!row || row.unread.has(suggestionId) === isNew) return;
      if (isNew) row.unread.add(suggestionId);
      else row.unread.delete(suggestionId);
      render(row);
      if (isNew) highlight(row);
    }

    // The rows become the queue as read, in the server's order: those no longer in it go, the others are updated
    // in place (each keeps its element).
    let reloads = 0;  // only the newest reload may replace the rows: an older answer would undo newer updates
    function reload() {
      const mine = ++reloads;
      api("GET", "/api/queue").then((fresh) => {
        if (mine !== reloads) return;
        const listed = new Set(fresh.map((item) => item.conversation_id));
        for (const [conversationId, row] of rows) {
          if (!listed.has(conversationId)) {
            row.remove();
            rows.delete(conversationId);
          }
        }
        fresh.forEach((item) => upsert(item, false));
        let slot = body.firstElementChild;
        for (const item of fresh) {  // moving only the rows out of place
          const row = rows.get(item.conversation_id);
          if (row === slot) slot = slot.nextElementSibling;
          else if (row) body.insertBefore(row, slot);
        }
      }).catch(() => {});
    }

    // A live update says what changed but not the case's clocks (its state and what falls due next): the row
    // changes at once, then the queue is read again for its order, half a second after the first update of a burst
    // (not after the last: a busy queue never pauses).
    let rereading = null;
    function reread() {
      if (rereading === null) rereading = setTimeout(() => { rereading = null; reload(); }, 500);
    }

    items.forEach((item) => upsert(item, false));
    empty.hidden = rows.size > 0;
    setInterval(() => rows.forEach(tick), 1000);
    live("/api/live", {
      message: (d) => { said(d); reread(); },
      case: (d) => { upsert(d.case, true); reread(); },
      // A suggestion may be a timer's notice (a target passed): the queue is read again for the row's breach.
      suggestion: (d) => { unread(d.suggestion.conversation_id, d.suggestion.suggestion_id, true); if (d.suggestion.kind === "follow_up") reread(); },
      feedback: (d) => unread(d.case.conversation_id, d.feedback.suggestion_id, false),
    }, reload);
    // Back from a conversation, or from another tab: what was read there is no longer unread here.
    window.addEventListener("pageshow", (event) => { if (event.persisted) reload(); });
    document.addEventListener("visibilitychange", () => { if (document.visibilityState === "visible") reload(); });
  }

  // ---- a conversation --------------------------------------------------------------------------------------
  function conversationPage(view) {
    const id = view.conversation_id;
    const messages = document.getElementById("messages");
    const cards = document.getElementById("cards");
    const noSuggestions = document.getElementById("no-suggestions");
    const reply = document.getElementById("reply");
    const replyNote = document.getElementById("reply-note");
    const earlier = document.getElementById("earlier");
    const draftMark = cards.dataset.draftMark || "";
    const seenMessages = new Map();  // message id -> text
    const cardNodes = new Map();
    let older = view.older;  // the cursor of the page before the oldest one shown; null once it is all here

    // New messages go at the bottom; those of an earlier page at the top, keeping the reader's place.
    function addMessage(m, earlierPage = false) {
      if (seenMessages.has(m.message_id)) return;
      seenMessages.set(m.message_id, m.text);
      const who = m.author ? `${m.role} · ${m.author}` : m.role;
      const item = el("li", { class: `msg ${m.role}`, "data-message-id": m.message_id },
        el("span", { class: "meta" }, `${who} · `, el("time", { datetime: m.sent_at, title: stamp(m.sent_at), text: clock(m.sent_at) })),
        el("span", { class: "text", text: m.text }));
      if (earlierPage) {
        const fromBottom = messages.scrollHeight - messages.scrollTop;
        messages.prepend(item);
        messages.scrollTop = messages.scrollHeight - fromBottom;
      } else {
        messages.append(item);
        messages.scrollTop = messages.scrollHeight;
      }
    }

    function sourceItem(source) {
      const label = source.title || source.id;
      const body = KNOWLEDGE_KINDS.has(source.kind)
        ? el("a", { href: `/panel/knowledge/${encodeURIComponent(source.id)}`, target: "_blank", rel: "noopener", text: label })
        : el("span", { text: label });
      return el("li", {}, el("span", { class: "mono", text: `${source.kind}: ` }), body);
    }

    // Notices to the analyst (a reminder, a missed promise or target, a handover brief): noted or dismissed, never
    // copied into the reply. Actions are decided under Actions. Neither has a confidence to show: a notice is so, and
    // an action's verdict is the rule's.
    const NOTICES = new Set(["follow_up", "handover", "escalation"]);
    const UNSCORED = new Set(["follow_up", "handover", "escalation", "action"]);

    function addCard(s, earlierPage = false) {
      if (cardNodes.has(s.suggestion_id)) return;
      const percent = Math.round(s.confidence * 100);
      const text = el("p", { class: "text", text: s.text });
      const verdict = el("p", { class: "verdict", role: "status", "aria-live": "polite" });
      const buttons = el("div", { class: "buttons" });
      const asked = seenMessages.get(s.in_reply_to);
      const quote = asked ? (asked.length > 140 ? `${asked.slice(0, 140)}…` : asked) : null;
      const card = el("li", { class: "card", "data-suggestion-id": s.suggestion_id, "data-kind": s.kind, "data-state": "new", tabindex: "-1" },
        el("header", {},
          el("span", { class: "kind", text: KIND_LABELS[s.kind] || s.kind }),
          // The card's one number: the calibrated chance that it is right. Sources carry no raw retrieval scores.
          UNSCORED.has(s.kind) ? null : el("span", { class: "confidence", title: "How likely vigil judges this suggestion to be right" },
            "Confidence ",
            el("meter", { min: "0", max: "1", value: String(s.confidence), "aria-hidden": "true" }),
            `${percent}%`)),
        quote ? el("p", { class: "asked" }, el("strong", { text: "In reply to: " }), `“${quote}”`) : null,
        text,
        drafted(s) ? el("p", { class: "drafted", role: "note", text: draftMark }) : null,
        s.step ? el("p", { class: "step" }, el("strong", { text: "Step: " }), words(s.step.label), ` (${words(s.step.procedure)})`) : null,
        s.why ? el("p", { class: "why" }, el("strong", { text: "Why: " }), s.why) : null,
        s.sources && s.sources.length ? el("ul", { class: "sources", "aria-label": "Sources" }, ...s.sources.map(sourceItem)) : null,
        verdict,
        buttons);
      card.parts = { text, verdict, buttons, suggestion: s };
      cardNodes.set(s.suggestion_id, card);
      showButtons(card);
      if (earlierPage) cards.append(card);
      else cards.prepend(card);
      noSuggestions.hidden = true;
      if (earlierPage) return;  // older than what was marked read already
      if (!newest || Date.parse(s.created_at) > Date.parse(newest)) newest = s.created_at;
      unseen = true;
      markRead();
    }

    function showButtons(card) {
      if (card.dataset.state !== "new") return;  // judged meanwhile (here, or by someone else, live)
      const action = card.parts.suggestion.action;
      if (card.parts.suggestion.kind === "action") {  // approved or rejected on its card under Actions, not accepted
        const open = action && action.status === "suggested";
        card.parts.buttons.replaceChildren(open ? el("a", { href: "#actions", text: "Decide it under Actions" }) : "");
        return;
      }
      if (NOTICES.has(card.parts.suggestion.kind)) {
        card.parts.buttons.replaceChildren(
          el("button", { type: "button", onclick: () => send(card, "accepted", null) }, "Noted"),
          el("button", { type: "button", class: "secondary", onclick: () => dismiss(card) }, "Dismiss"));
        return;
      }
      card.parts.buttons.replaceChildren(
        el("button", { type: "button", onclick: () => accept(card), "aria-label": "Accept: copy into the reply" }, "Accept"),
        el("button", { type: "button", class: "secondary", onclick: () => edit(card) }, "Edit"),
        el("button", { type: "button", class: "secondary", onclick: () => dismiss(card) }, "Dismiss"));
    }

    // "Dismissed by ana: wrong product": a dismissal's reason is what the next analyst needs to know.
    function settle(card, verdict, by, text) {
      card.dataset.state = verdict;
      card.parts.form?.remove();
      card.parts.form = null;
      card.parts.buttons.replaceChildren();
      const reason = verdict === "dismissed" && text ? `: ${text}` : "";
      const said = verdict === "accepted" && NOTICES.has(card.parts.suggestion.kind) ? "Noted" : VERDICT_LABELS[verdict] || verdict;
      card.parts.verdict.textContent = `${said}${by ? ` by ${by}` : ""}${reason}`;
    }

    async function send(card, verdict, text) {
      const s = card.parts.suggestion;
      const buttons = card.querySelectorAll("button");  // the card's and its open form's: one verdict per click
      buttons.forEach((b) => { b.disabled = true; });
      try {
        await api("POST", `/api/suggestions/${encodeURIComponent(s.suggestion_id)}/feedback`, { verdict, text });
        // The stored verdict can come back live, with its author, before this answer does: keep that one.
        if (card.dataset.state !== verdict) settle(card, verdict, null, text);
        return true;
      } catch (error) {
        card.parts.verdict.textContent = `Could not record that: ${error.message}`;
        buttons.forEach((b) => { b.disabled = false; });
        return false;
      }
    }

    function useReply(text) {
      reply.value = text;
      reply.focus();
      navigator.clipboard?.writeText(text).then(
        () => { replyNote.textContent = "Copied to the clipboard."; },
        () => { replyNote.textContent = ""; });
    }

    async function accept(card) {
      if (await send(card, "accepted", null)) useReply(card.parts.suggestion.text);
    }

    // Edit and dismiss open a small form in place of the card's buttons: a field, a confirm button and Cancel.
    function openForm(card, kind, caption, field, confirmText, confirm) {
      const form = el("div", { class: kind }, caption, field, el("div", { class: "buttons" },
        el("button", { type: "button", onclick: confirm }, confirmText),
        el("button", { type: "button", class: "secondary", onclick: () => {
          form.remove();
          card.parts.form = null;
          showButtons(card);
        } }, "Cancel")));
      card.parts.form = form;
      card.parts.buttons.replaceChildren();
      card.parts.buttons.after(form);
      field.focus();
    }

    function edit(card) {
      const area = el("textarea", { rows: "5", "aria-label": "Edit the suggestion" });
      area.value = card.parts.suggestion.text;
      openForm(card, "editor", null, area, "Accept edited", async () => {
        const edited = area.value.trim();
        if (!edited) { area.focus(); return; }
        if (await send(card, "edited", edited)) useReply(edited);
      });
    }

    function dismiss(card) {
      const reason = el("input", { type: "text", maxlength: "500", id: `why-${card.dataset.suggestionId}` });
      const caption = el("label", { for: reason.id, text: "Why dismiss it? (optional)" });
      openForm(card, "dismissal", caption, reason, "Confirm dismiss", () => send(card, "dismissed", reason.value.trim() || null));
    }

    function applyFeedback(f) {
      const card = cardNodes.get(f.suggestion_id);
      if (card) settle(card, f.verdict, f.by, f.text);
    }

    function applyCase(c) {
      for (const [name, value] of Object.entries({ status: label(c.status), assignee: c.assignee, priority: c.priority })) {
        const node = document.querySelector(`[data-fact="${name}"]`);
        if (node) node.textContent = value || "—";
      }
    }

    // What this analyst has seen is no longer unread in their queue: marked when the page is shown and when a card
    // arrives while it is in view, live or by a resync (once for a burst).
    // Read "through" the newest card shown, not "until now": a suggestion made but not yet shown stays unread.
    let unseen = true;
    let marking = null;
    let newest = null;  // the created_at of the newest card on the page
    function markRead() {
      if (!unseen || !newest || document.visibilityState !== "visible" || marking) return;
      marking = setTimeout(() => {
        marking = null;
        unseen = false;
        api("POST", `/api/conversations/${encodeURIComponent(id)}/read`, { through: newest }).catch(() => { unseen = true; });
      }, 250);
    }
    document.addEventListener("visibilitychange", markRead);

    // A machine-written draft says so on its card (vigil marks its "why").
    function drafted(s) {
      return Boolean(draftMark && s.why && s.why.startsWith(draftMark));
    }

    // A page comes newest first: the newest page (at load, or a resync) adds below and above what is shown, an
    // earlier page only above.
    function load(state) {
      [...state.messages].reverse().forEach((m) => addMessage(m, false));
      [...state.suggestions].reverse().forEach((s) => addCard(s, false));
      state.feedback.forEach(applyFeedback);
      applyCase(state);
    }

    function loadEarlier(state) {
      state.messages.forEach((m) => addMessage(m, true));
      state.suggestions.forEach((s) => addCard(s, true));
      state.feedback.forEach(applyFeedback);
      older = state.older;
      earlier.hidden = !older;
    }

    // After a reconnection: the newest page, joined to what is shown. If more arrived meanwhile than a page holds,
    // the two do not meet, and adding it would hide a gap: show the newest page alone, the rest a click away.
    function resync(state) {
      const meets = !state.older || state.messages.some((m) => seenMessages.has(m.message_id));
      if (seenMessages.size && state.messages.length && !meets) {
        messages.replaceChildren();
        seenMessages.clear();
        older = state.older;
        earlier.hidden = !older;
      }
      load(state);
    }

    earlier.addEventListener("click", () => {
      if (!older) return;
      earlier.disabled = true;
      api("GET", `/api/conversations/${encodeURIComponent(id)}?before=${encodeURIComponent(older)}`)
        .then(loadEarlier)
        .catch((error) => { replyNote.textContent = `Could not load earlier messages: ${error.message}`; })
        .finally(() => { earlier.disabled = false; });
    });

    // The Progress and Actions sections: drawn on the server (vigil/panel/progress.py, actions_view.py), counted
    // down here every second, and drawn again by the server when the case moves (a message, a change, a follow-up,
    // a next step, a handover; a new action card). What replaces a section is the server's autoescaped HTML, as
    // trusted as the page itself; it keeps its <details> open or closed as the analyst left them.
    function drawnSection(sectionId, path) {
      const section = { node: document.getElementById(sectionId) };
      let redrawing = null;
      let redraws = 0;  // only the newest answer may replace the section
      section.redraw = () => {
        if (redrawing !== null) return;  // one redraw for a burst of updates, drawn after the first of them
        redrawing = setTimeout(async () => {
          redrawing = null;
          const mine = ++redraws;
          try {
            const response = await fetch(`${path}/${encodeURIComponent(id)}`, { credentials: "same-origin" });
            if (!response.ok || response.redirected || mine !== redraws) return;  // signed out: the stream says so
            const drawn = new DOMParser().parseFromString(await response.text(), "text/html").getElementById(sectionId);
            if (!drawn || mine !== redraws) return;
            for (const open of section.node.querySelectorAll("details[open][class]")) {
              drawn.querySelector(`details.${open.classList[0]}`)?.setAttribute("open", "");
            }
            const fresh = document.importNode(drawn, true);
            tickCountdowns(fresh);
            section.node.replaceWith(fresh);
            section.node = fresh;
          } catch (_) {
            /* the next update or resync draws it again */
          }
        }, 300);
      };
      tickCountdowns(section.node);
      setInterval(() => tickCountdowns(section.node), 1000);
      return section;
    }
    const progress = drawnSection("progress", "/panel/progress");
    const actions = drawnSection("actions", "/panel/actions");
    const redrawProgress = progress.redraw;
    progress.node.parentNode.addEventListener("click", (event) => {
      if (!event.target.closest("[data-use-reply]")) return;
      const text = document.querySelector("#progress .reply-text");
      if (text) useReply(text.textContent);
    });
    const PROGRESS_KINDS = new Set(["follow_up", "next_step", "handover", "escalation"]);

    // Approve or reject an action with the arguments' hash its card was drawn with: if the action has changed
    // since, the API refuses (409) instead of running what the analyst did not see. The decision goes onto the
    // stream; the card changes when vigil has taken it (a new action card arrives live and the section is redrawn).
    actions.node.parentNode.addEventListener("click", async (event) => {
      const button = event.target.closest("#actions [data-decide]");
      if (!button) return;
      const card = button.closest(".action-card");
      const note = card.querySelector(".decision-note");
      const buttons = card.querySelectorAll("button[data-decide]");
      buttons.forEach((b) => { b.disabled = true; });
      const decision = button.dataset.decide;
      try {
        await api("POST", `/api/actions/${encodeURIComponent(card.dataset.actionId)}/${decision}`, { arguments_hash: button.dataset.hash });
        note.textContent = decision === "approve" ? "Approved: vigil is running it…" : "Rejected: vigil is recording it…";
        setTimeout(actions.redraw, 4000);  // in case vigil refused it after all (it then sends no new card)
      } catch (error) {
        note.textContent = `Could not ${decision} it: ${error.message}`;
        buttons.forEach((b) => { b.disabled = false; });
      }
    });

    document.getElementById("copy-reply").addEventListener("click", () => useReply(reply.value));
    load(view);
    markRead();
    const reload = () => {
      redrawProgress();
      actions.redraw();
      return api("GET", `/api/conversations/${encodeURIComponent(id)}`).then(resync).catch(() => {});
    };
    live(`/api/live?conversation=${encodeURIComponent(id)}`, {
      // A message too long for the replicas' relay arrives cut short: fetch it whole.
      message: (d) => {
        if (d.message.truncated) reload(); else addMessage(d.message);
        applyCase(d.case);
        redrawProgress();
      },
      case: (d) => { applyCase(d.case); redrawProgress(); },
      suggestion: (d) => {
        if (d.suggestion.truncated) reload(); else addCard(d.suggestion);
        if (PROGRESS_KINDS.has(d.suggestion.kind)) redrawProgress();
        if (d.suggestion.kind === "action") actions.redraw();
      },
      feedback: (d) => applyFeedback(d.feedback),
    }, reload);
  }

  // ---- the knowledge review ----------------------------------------------------------------------------------
  // The page is drawn on the server; Approve and Retire change an entry's status through the API, and the entry
  // then shows its new status and the action that would undo it.
  const GOVERNED = {
    active: { fact: "Served to analysts", said: "Approved: analysts are shown it now." },
    retired: { fact: "Retired (not served)", said: "Retired: analysts are no longer shown it." },
  };

  function reviewPage() {
    for (const item of document.querySelectorAll(".review[data-entry-id]")) {
      const note = item.querySelector(".verdict");
      const buttons = [...item.querySelectorAll("button[data-action]")];
      for (const button of buttons) {
        button.addEventListener("click", async () => {
          buttons.forEach((b) => { b.disabled = true; });
          note.textContent = "";
          try {
            const done = await api("POST", `/api/knowledge/${encodeURIComponent(item.dataset.entryId)}/${button.dataset.action}`);
            item.dataset.status = done.status;
            const expired = done.status === "active" && "expired" in item.dataset;  // served no more all the same
            item.querySelector('[data-fact="status"]').textContent = expired ? "Expired (not served)" : GOVERNED[done.status].fact;
            note.textContent = GOVERNED[done.status].said;
            for (const b of buttons) b.hidden = (b.dataset.action === "approve") === (done.status === "active");
          } catch (error) {
            note.textContent = `Could not do that: ${error.message}`;
          } finally {
            buttons.forEach((b) => { b.disabled = false; });
          }
        });
      }
    }
  }

  if (page === "queue") queuePage(initial || []);
  else if (page === "conversation") conversationPage(initial);
  else if (page === "review") reviewPage();
})();
