// The Countersign sandbox page: one Slack-like channel, drawn from /sandbox/state.
//
// Message text is untrusted (an LLM wrote much of it): the DOM is built with
// createElement and textContent only, never innerHTML, and only http(s)/mailto links
// become <a>. Slack escapes &, < and > in message text; they are unescaped once, when a
// text node is made. Emoji are drawn as inline SVG icons (ICONS), as Slack draws them as
// images: a machine without an emoji font would show empty boxes.
"use strict";

const page = {
  state: null,
  threadTs: null, // the open thread's parent ts
  home: false, // the app's Home tab is shown instead of the channel
  modalKey: null, // "<view id>:<hash>" of the modal on screen; a new hash redraws it
  drawn: {}, // what each list shows, to leave it alone when nothing changed
  nodes: {}, // per list: message key -> { json, node }, to keep unchanged messages' nodes
  refreshing: null,
  again: false,
};

const EMOJI = {
  tada: "🎉", white_check_mark: "✅", heavy_check_mark: "✔️", x: "❌", warning: "⚠️",
  hourglass: "⌛", hourglass_flowing_sand: "⏳", eyes: "👀", memo: "📝", rocket: "🚀",
  "+1": "👍", thumbsup: "👍", "-1": "👎", no_entry: "⛔", no_entry_sign: "🚫", bell: "🔔",
  speech_balloon: "💬", robot_face: "🤖", stopwatch: "⏱️", question: "❓", pencil2: "✏️",
  arrows_counterclockwise: "🔄", page_facing_up: "📄", lock: "🔒", wave: "👋",
  sparkles: "✨", rotating_light: "🚨", clipboard: "📋", hammer_and_wrench: "🛠️",
  raised_hand: "✋", stop_sign: "🛑", zzz: "💤", information_source: "ℹ️",
};
// Each icon: shapes in a 20x20 box, [tag, attributes]. What is not here gets GENERIC.
const C = { green: "#2eb67d", red: "#e01e5a", amber: "#ecb22e", blue: "#1264a3", grey: "#616061", white: "#fff", ink: "#1d1c1d" };
const CHECK = ["path", { d: "M5 10.5l3.2 3.2L15 7", fill: "none", stroke: C.white, "stroke-width": 2.4, "stroke-linecap": "round", "stroke-linejoin": "round" }];
const CLOCK = [["circle", { cx: 10, cy: 11, r: 7.5, fill: C.white, stroke: C.grey, "stroke-width": 1.6 }], ["path", { d: "M10 6.5V11l3 2", fill: "none", stroke: C.ink, "stroke-width": 1.6, "stroke-linecap": "round" }]];
const HOURGLASS = [["path", { d: "M5 2h10M5 18h10M6 2c0 5 8 5 8 8s-8 3-8 8M14 2c0 5-8 5-8 8s8 3 8 8", fill: "none", stroke: C.amber, "stroke-width": 1.8, "stroke-linecap": "round" }], ["path", { d: "M7.5 17h5l-2.5-3z", fill: C.amber }]];
const ARROW = [["path", { d: "M15.5 10a5.5 5.5 0 1 1-2-4.3", fill: "none", stroke: C.blue, "stroke-width": 2.2, "stroke-linecap": "round" }], ["path", { d: "M11.5 3.5l4.5 1-1 4.5z", fill: C.blue }]];
const ICONS = {
  "✅": [["rect", { x: 1, y: 1, width: 18, height: 18, rx: 4, fill: C.green }], CHECK],
  "✔": [["path", { d: "M4 10.5l4 4L16 6", fill: "none", stroke: C.green, "stroke-width": 3, "stroke-linecap": "round", "stroke-linejoin": "round" }]],
  "❌": [["path", { d: "M4.5 4.5l11 11M15.5 4.5l-11 11", stroke: C.red, "stroke-width": 3.2, "stroke-linecap": "round" }]],
  "⛔": [["circle", { cx: 10, cy: 10, r: 9, fill: C.red }], ["rect", { x: 4.5, y: 8.5, width: 11, height: 3, rx: 1, fill: C.white }]],
  "🚫": [["circle", { cx: 10, cy: 10, r: 7.8, fill: "none", stroke: C.red, "stroke-width": 2.4 }], ["path", { d: "M4.6 4.6l10.8 10.8", stroke: C.red, "stroke-width": 2.4 }]],
  "⏳": HOURGLASS, "⌛": HOURGLASS,
  "⚙": [["circle", { cx: 10, cy: 10, r: 6.5, fill: "none", stroke: C.grey, "stroke-width": 3.5, "stroke-dasharray": "2.6 2.5" }], ["circle", { cx: 10, cy: 10, r: 5, fill: "none", stroke: C.grey, "stroke-width": 2.2 }]],
  "👀": [["ellipse", { cx: 6, cy: 10, rx: 4.2, ry: 6, fill: C.white, stroke: C.ink, "stroke-width": 1.2 }], ["ellipse", { cx: 14, cy: 10, rx: 4.2, ry: 6, fill: C.white, stroke: C.ink, "stroke-width": 1.2 }], ["circle", { cx: 7.3, cy: 11, r: 2, fill: C.ink }], ["circle", { cx: 15.3, cy: 11, r: 2, fill: C.ink }]],
  "👁": [["path", { d: "M1.5 10s3.5-5.5 8.5-5.5 8.5 5.5 8.5 5.5-3.5 5.5-8.5 5.5S1.5 10 1.5 10z", fill: C.white, stroke: C.ink, "stroke-width": 1.4 }], ["circle", { cx: 10, cy: 10, r: 2.6, fill: C.ink }]],
  "💬": [["path", { d: "M2 4a2 2 0 0 1 2-2h12a2 2 0 0 1 2 2v8a2 2 0 0 1-2 2H8l-4 4v-4a2 2 0 0 1-2-2z", fill: C.blue }]],
  "✏": [["path", { d: "M3 17l1-4L13.5 3.5l3 3L7 16z", fill: C.amber, stroke: C.ink, "stroke-width": 1.1, "stroke-linejoin": "round" }]],
  "🔁": ARROW, "🔄": ARROW,
  "↩": [["path", { d: "M7 4L3 8l4 4M3.5 8H12a5 5 0 0 1 0 10H9", fill: "none", stroke: C.blue, "stroke-width": 2.2, "stroke-linecap": "round", "stroke-linejoin": "round" }]],
  "⚠": [["path", { d: "M10 2l8.5 15.5h-17z", fill: C.amber, "stroke-linejoin": "round" }], ["path", { d: "M10 7.5v4.5M10 14.5v.5", stroke: C.ink, "stroke-width": 2, "stroke-linecap": "round" }]],
  "⏰": CLOCK, "⏱": CLOCK,
  "🚨": [["path", { d: "M4.5 16V11a5.5 5.5 0 0 1 11 0v5z", fill: C.red }], ["rect", { x: 2.5, y: 16, width: 15, height: 2.5, rx: 1, fill: C.grey }]],
  "🎉": [["path", { d: "M2 18l4-11 7 7z", fill: C.amber }], ["circle", { cx: 14, cy: 4, r: 1.5, fill: C.red }], ["circle", { cx: 17, cy: 9, r: 1.3, fill: C.blue }], ["circle", { cx: 10, cy: 2.5, r: 1.2, fill: C.green }]],
  "ℹ": [["rect", { x: 1, y: 1, width: 18, height: 18, rx: 4, fill: C.blue }], ["path", { d: "M10 8.5v6.5M10 5v.5", stroke: C.white, "stroke-width": 2.4, "stroke-linecap": "round" }]],
  "📄": [["path", { d: "M4 1.5h8l4 4v13H4z", fill: C.white, stroke: C.grey, "stroke-width": 1.3, "stroke-linejoin": "round" }], ["path", { d: "M7 9h6M7 12h6M7 15h4", stroke: C.grey, "stroke-width": 1.2 }]],
  "🖼": [["rect", { x: 1.5, y: 3, width: 17, height: 14, rx: 1.5, fill: C.white, stroke: C.grey, "stroke-width": 1.4 }], ["path", { d: "M3.5 15l4.5-5 3 3 2-2 3.5 4z", fill: C.green }]],
  "🔧": [["path", { d: "M12.5 2.5a4.5 4.5 0 0 0-4.2 6.1L2.8 14.1a1.6 1.6 0 0 0 0 2.3l.8.8a1.6 1.6 0 0 0 2.3 0l5.5-5.5a4.5 4.5 0 0 0 6.1-4.2l-2.6 2.6-2.6-.7-.7-2.6z", fill: C.grey }]],
  "🛠": [["path", { d: "M12.5 2.5a4.5 4.5 0 0 0-4.2 6.1L2.8 14.1a1.6 1.6 0 0 0 0 2.3l.8.8a1.6 1.6 0 0 0 2.3 0l5.5-5.5a4.5 4.5 0 0 0 6.1-4.2l-2.6 2.6-2.6-.7-.7-2.6z", fill: C.grey }], ["path", { d: "M3 3l6 6M2.5 5.5l3-3", stroke: C.amber, "stroke-width": 2, "stroke-linecap": "round" }]],
  "🔗": [["path", { d: "M8.5 11.5l3-3M7 9.5l-2 2a2.8 2.8 0 0 0 4 4l2-2M13 10.5l2-2a2.8 2.8 0 0 0-4-4l-2 2", fill: "none", stroke: C.blue, "stroke-width": 2, "stroke-linecap": "round" }]],
  "👍": [["path", { d: "M2 9h3.5v9H2zM7 18V9l3.5-7c1.5 0 2.5 1 2 3l-1 3H17a1.5 1.5 0 0 1 1.5 1.8l-1.5 6.5a2 2 0 0 1-2 1.7z", fill: C.amber }]],
};
const GENERIC = [["circle", { cx: 10, cy: 10, r: 8.5, fill: C.amber }], ["circle", { cx: 7, cy: 8, r: 1.2, fill: C.ink }], ["circle", { cx: 13, cy: 8, r: 1.2, fill: C.ink }], ["path", { d: "M6.5 12.5a4.5 4.5 0 0 0 7 0", fill: "none", stroke: C.ink, "stroke-width": 1.4, "stroke-linecap": "round" }]];
// An emoji: a character shown as an emoji by default, a pictograph asked to be one (U+FE0F)
// or one past U+1F000 (no text font has those), with its skin tone or joined parts; or a
// keycap. "©" or "↩" alone stay text, as in Slack.
const EMOJI_RUN = /(?:\p{Emoji_Presentation}|\p{Extended_Pictographic}\uFE0F|(?=\p{Extended_Pictographic})[\u{1F000}-\u{1FFFF}])(?:\uFE0F|[\u{1F3FB}-\u{1F3FF}]|\u200D\p{Extended_Pictographic}\uFE0F?)*|[#*0-9]\uFE0F?\u20E3/gu;
const ENTITIES = { "&lt;": "<", "&gt;": ">", "&amp;": "&" };
const REQUIRED = "Please complete this required field.";

// -- small DOM helpers ----------------------------------------------------------------------

const byTestId = (id) => document.querySelector(`[data-testid="${id}"]`);
// Set as properties (a textarea has no value attribute); the rest are attributes, so
// `selected` and `checked` are the defaults a form starts from.
const PROPERTIES = new Set(["value", "disabled", "multiple", "hidden"]);

function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key === "icons") node.append(...iconized(value));
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (PROPERTIES.has(key)) node[key] = value;
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) if (child !== null && child !== undefined) node.append(child);
  return node;
}

// One emoji as an inline SVG icon; its character stays its accessible name.
function icon(emoji) {
  const key = emoji.replace(/[\uFE0F\u{1F3FB}-\u{1F3FF}]/gu, "");
  const svgNS = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(svgNS, "svg");
  for (const [name, value] of Object.entries({ class: "emoji", viewBox: "0 0 20 20", role: "img", "aria-label": emoji, "data-emoji": emoji })) svg.setAttribute(name, value);
  for (const [tag, attributes] of ICONS[key] ?? GENERIC) {
    const shape = document.createElementNS(svgNS, tag);
    for (const [name, value] of Object.entries(attributes)) shape.setAttribute(name, String(value));
    svg.append(shape);
  }
  return svg;
}

// Text with its emoji drawn as icons: strings and SVG nodes, to append.
function iconized(text) {
  const out = [];
  let last = 0;
  const value = String(text ?? "");
  for (const match of value.matchAll(EMOJI_RUN)) {
    if (match.index > last) out.push(value.slice(last, match.index));
    out.push(icon(match[0]));
    last = match.index + match[0].length;
  }
  if (last < value.length) out.push(value.slice(last));
  return out;
}

const unescapeSlack = (text) => String(text ?? "").replace(/&(?:lt|gt|amp);/g, (e) => ENTITIES[e]);
const plain = (object) => unescapeSlack(object?.text ?? "");
const byTs = (a, b) => a.ts.length - b.ts.length || (a.ts < b.ts ? -1 : a.ts > b.ts ? 1 : 0);
const userName = (id) => page.state?.users[id] ?? id ?? "someone";

function timeOf(ts) {
  const date = new Date(Number(String(ts).split(".")[0]) * 1000);
  return date.toLocaleTimeString([], { hour: "numeric", minute: "2-digit" });
}

function safeLink(url, label) {
  const href = unescapeSlack(url);
  if (!/^(https?:|mailto:)/i.test(href)) return document.createTextNode(label ?? href);
  return el("a", { href, target: "_blank", rel: "noopener noreferrer", text: label ?? href });
}

const mention = (text) => el("span", { class: "mention", text });

// -- mrkdwn -----------------------------------------------------------------------------------

const INLINE = new RegExp(
  [
    "<([^<>\\n]+)>", // 1: <url|label>, <@U1>, <#C1>, <!here>, <!date^…|fallback>
    "`([^`\\n]+)`", // 2: code
    "(?<![\\w*])\\*(?!\\s)([^*\\n]*?[^\\s*])\\*(?![\\w*])", // 3: *bold*
    "(?<![\\w_])_(?!\\s)([^_\\n]*?[^\\s_])_(?![\\w_])", // 4: _italic_
    "(?<![\\w~])~(?!\\s)([^~\\n]*?[^\\s~])~(?![\\w~])", // 5: ~strike~
    ":([a-z0-9_+\\-]+):", // 6: :emoji:
  ].join("|"),
  "g",
);

function mrkdwn(text) {
  const root = el("div", { class: "mrkdwn" });
  const parts = String(text ?? "").split("```");
  if (parts.length % 2 === 0) {
    const tail = parts.pop(); // an unclosed ``` stays as typed
    parts.push(parts.pop() + "```" + tail);
  }
  parts.forEach((part, i) => {
    if (i % 2 === 1) {
      root.append(el("pre", { class: "pre", icons: unescapeSlack(part.replace(/^\n|\n$/g, "")) }));
      return;
    }
    let body = part;
    if (i > 0) body = body.replace(/^\n/, "");
    if (i < parts.length - 1) body = body.replace(/\n$/, "");
    if (body) root.append(...lineRuns(body));
  });
  return root;
}

// Consecutive lines starting with ">" (sent as "&gt;") are one quote.
function lineRuns(text) {
  const runs = [];
  for (const line of text.split("\n")) {
    const quoted = /^(&gt;|>) ?/.exec(line);
    const kind = quoted ? "quote" : "text";
    const content = quoted ? line.slice(quoted[0].length) : line;
    const last = runs[runs.length - 1];
    if (last && last.kind === kind) last.lines.push(content);
    else runs.push({ kind, lines: [content] });
  }
  return runs.map(({ kind, lines }) =>
    el(kind === "quote" ? "blockquote" : "div", { class: "line-run" }, inline(lines.join("\n"))),
  );
}

function inline(text) {
  const out = [];
  let last = 0;
  for (const match of text.matchAll(INLINE)) {
    if (match.index > last) out.push(...iconized(unescapeSlack(text.slice(last, match.index))));
    out.push(token(match));
    last = match.index + match[0].length;
  }
  if (last < text.length) out.push(...iconized(unescapeSlack(text.slice(last))));
  return out;
}

function token(match) {
  const [whole, angle, code, bold, italic, strike, emoji] = match;
  if (angle !== undefined) return special(angle);
  if (code !== undefined) return el("code", { text: unescapeSlack(code) });
  if (bold !== undefined) return el("strong", {}, inline(bold));
  if (italic !== undefined) return el("em", {}, inline(italic));
  if (strike !== undefined) return el("s", {}, inline(strike));
  return EMOJI[emoji] ? icon(EMOJI[emoji]) : whole;
}

function special(inside) {
  const bar = inside.indexOf("|");
  const target = bar < 0 ? inside : inside.slice(0, bar);
  const label = bar < 0 ? null : unescapeSlack(inside.slice(bar + 1));
  const state = page.state;
  if (target.startsWith("@")) return mention("@" + (state.users[target.slice(1)] ?? label ?? target.slice(1)));
  if (target.startsWith("#")) return mention("#" + (state.channels[target.slice(1)] ?? label ?? target.slice(1)));
  if (target.startsWith("!subteam^")) return mention(label ?? "@" + target.slice(9));
  if (target.startsWith("!date^")) return el("time", { text: dateText(target.split("^")[1], label) });
  if (target.startsWith("!")) return mention("@" + (label ?? target.slice(1)));
  return safeLink(target, label);
}

function dateText(seconds, fallback) {
  const value = Number(seconds);
  if (!Number.isFinite(value)) return fallback ?? "";
  return new Date(value * 1000).toLocaleString([], { dateStyle: "medium", timeStyle: "short" });
}

function textObject(object) {
  if (!object) return null;
  return object.type === "mrkdwn" ? mrkdwn(object.text) : el("span", { class: "plain", icons: plain(object) });
}

// -- rich_text (what people type) ---------------------------------------------------------------

function richText(block) {
  return el("div", { class: "rich-text" }, (block.elements ?? []).map(richPart));
}

function richPart(part) {
  const inner = () => (part.elements ?? []).map(richInline);
  switch (part.type) {
    case "rich_text_section": return el("div", { class: "line-run" }, inner());
    case "rich_text_preformatted": return el("pre", { class: "pre" }, inner());
    case "rich_text_quote": return el("blockquote", { class: "line-run" }, inner());
    case "rich_text_list":
      return el(part.style === "ordered" ? "ol" : "ul", {}, (part.elements ?? []).map((item) => el("li", {}, richPart(item))));
    default: return null;
  }
}

function richInline(item) {
  let node;
  switch (item.type) {
    case "text": node = el("span", { icons: item.text ?? "" }); break;
    case "link": node = safeLink(item.url ?? "", item.text || null); break;
    case "user": node = mention("@" + userName(item.user_id)); break;
    case "channel": node = mention("#" + (page.state.channels[item.channel_id] ?? item.channel_id)); break;
    case "usergroup": node = mention("@" + item.usergroup_id); break;
    case "broadcast": node = mention("@" + item.range); break;
    case "emoji": node = EMOJI[item.name] ? icon(EMOJI[item.name]) : document.createTextNode(`:${item.name}:`); break;
    case "date": node = el("time", { text: dateText(item.timestamp, item.fallback) }); break;
    default: node = document.createTextNode(item.text ?? "");
  }
  const style = item.style ?? {};
  for (const [flag, tag] of [["code", "code"], ["strike", "s"], ["italic", "em"], ["bold", "strong"]]) {
    if (style[flag]) node = el(tag, {}, node);
  }
  return node;
}

// -- Block Kit --------------------------------------------------------------------------------

// ctx: {ts, inThread} for a message, {view} for a modal.
function blocks(list, ctx) {
  return (list ?? []).map((block) => blockNode(block, ctx));
}

function blockNode(block, ctx) {
  switch (block.type) {
    case "section": {
      const main = el("div", { class: "section-main" }, textObject(block.text));
      if (block.fields?.length) main.append(el("div", { class: "section-fields" }, block.fields.map(textObject)));
      const accessory = block.accessory ? el("div", { class: "section-accessory" }, elementNode(block.accessory, block, ctx)) : null;
      return el("div", { class: "block section" }, main, accessory);
    }
    case "header": return el("div", { class: "block header", icons: plain(block.text) });
    case "context":
      return el("div", { class: "block context" }, (block.elements ?? []).map((item) =>
        item.type === "image" ? imageAlt(item.alt_text) : textObject(item)));
    case "divider": return el("hr", { class: "block divider" });
    case "actions": return el("div", { class: "block actions" }, (block.elements ?? []).map((item) => elementNode(item, block, ctx)));
    case "image": return el("figure", { class: "block image" }, block.title ? el("figcaption", { text: plain(block.title) }) : null, imageAlt(block.alt_text));
    case "rich_text": return el("div", { class: "block" }, richText(block));
    case "input": return inputBlock(block);
    default: return el("div", { class: "block unsupported", text: `[${block.type} block]` });
  }
}

const imageAlt = (alt) => el("span", { class: "image-alt", icons: `🖼 ${alt ?? "image"}` });

function elementNode(item, block, ctx) {
  const ids = { "data-action-id": item.action_id, "data-block-id": block.block_id };
  const clickable = ctx.ts !== undefined;
  switch (item.type) {
    case "button": {
      const button = el("button", {
        type: "button", class: `btn ${item.style ?? ""}`, "data-testid": "block-button", ...ids,
        icons: plain(item.text), disabled: !clickable, title: clickable ? null : "Not available in the sandbox",
      });
      button.addEventListener("click", async () => {
        if (item.confirm && !(await confirmDialog(item.confirm))) return;
        if (item.url && /^https?:/i.test(item.url)) window.open(item.url, "_blank", "noopener");
        await click(button, ctx, block, item);
      });
      return button;
    }
    case "static_select":
    case "overflow": {
      const first = item.type === "overflow" ? "⋯" : plain(item.placeholder) || "Choose…";
      const select = el("select", { class: `menu ${item.type}`, "data-testid": "block-select", ...ids, disabled: !clickable },
        el("option", { value: "", text: first, disabled: true, selected: !item.initial_option }),
        optionNodes(item, item.initial_option ? [item.initial_option.value] : []));
      select.addEventListener("change", () => click(select, ctx, block, item, select.value));
      return select;
    }
    case "radio_buttons": {
      const group = choiceGroup(item, "radio", `m-${ctx.ts}-${item.action_id}`, ids);
      group.addEventListener("change", (event) => click(group, ctx, block, item, event.target.value));
      return group;
    }
    case "image": return imageAlt(item.alt_text);
    default: return el("span", { class: "unsupported", text: `[${item.type}]` });
  }
}

function optionNodes(item, chosen) {
  const option = (o) => el("option", { value: o.value, text: plain(o.text), selected: chosen.includes(o.value) });
  if (item.option_groups) return item.option_groups.map((g) => el("optgroup", { label: plain(g.label) }, g.options.map(option)));
  return (item.options ?? []).map(option);
}

function choiceGroup(item, kind, name, attributes) {
  const initial = kind === "radio" ? [item.initial_option?.value] : (item.initial_options ?? []).map((o) => o.value);
  return el("fieldset", { class: `choices ${kind}`, ...attributes },
    (item.options ?? []).map((option) => el("label", { class: "choice" },
      el("input", { type: kind, name, value: option.value, checked: initial.includes(option.value) }),
      el("span", {}, textObject(option.text), option.description ? el("small", { text: plain(option.description) }) : null))));
}

// -- modals -----------------------------------------------------------------------------------

function inputBlock(block) {
  const id = block.block_id;
  return el("div", { class: "block input-block", "data-input-block": id, "data-optional": block.optional ? "true" : null },
    el("label", { class: "input-label", for: `in-${id}` }, plain(block.label),
      block.optional ? el("span", { class: "optional", text: " (optional)" }) : null),
    control(block.element ?? {}, id),
    block.hint ? el("div", { class: "hint", text: plain(block.hint) }) : null,
    el("div", { class: "field-error", "data-testid": "field-error", "data-error-for": id, hidden: true }));
}

function control(item, blockId) {
  const attributes = { id: `in-${blockId}`, "data-testid": "modal-input", "data-block-id": blockId, "data-action-id": item.action_id, "data-kind": item.type };
  const placeholder = item.placeholder ? plain(item.placeholder) : null;
  const people = () => Object.entries(page.state.users).filter(([id]) => id !== "USLACKBOT").map(([value, text]) => ({ value, text: { text } }));
  const rooms = () => Object.entries(page.state.channels).map(([value, text]) => ({ value, text: { text: `#${text}` } }));
  switch (item.type) {
    case "plain_text_input":
      return el(item.multiline ? "textarea" : "input", { ...attributes, type: item.multiline ? null : "text", value: item.initial_value ?? "", placeholder, maxlength: item.max_length, rows: item.multiline ? rowsFor(item.initial_value) : null });
    case "number_input":
      return el("input", { ...attributes, type: "text", inputmode: item.is_decimal_allowed ? "decimal" : "numeric", value: item.initial_value ?? "", placeholder });
    case "email_text_input":
    case "url_text_input":
      return el("input", { ...attributes, type: item.type === "email_text_input" ? "email" : "url", value: item.initial_value ?? "", placeholder });
    case "datepicker": return el("input", { ...attributes, type: "date", value: item.initial_date ?? "" });
    case "timepicker": return el("input", { ...attributes, type: "time", value: item.initial_time ?? "" });
    case "static_select":
    case "multi_static_select":
    case "users_select":
    case "multi_users_select":
    case "conversations_select":
    case "channels_select": {
      const multiple = item.type.startsWith("multi_");
      const source = item.type.includes("users") ? { options: people() } : item.type.endsWith("static_select") ? item : { options: rooms() };
      const initial = multiple
        ? (item.initial_options ?? []).map((o) => o.value).concat(item.initial_users ?? [])
        : [item.initial_option?.value ?? item.initial_user ?? item.initial_conversation ?? item.initial_channel];
      const chosen = initial.filter((v) => v !== undefined);
      return el("select", { ...attributes, multiple },
        multiple ? null : el("option", { value: "", text: placeholder ?? "Select an option", disabled: true, hidden: chosen.length > 0, selected: chosen.length === 0 }),
        optionNodes(source, chosen));
    }
    case "radio_buttons": return choiceGroup(item, "radio", `in-${blockId}`, attributes);
    case "checkboxes": return choiceGroup(item, "checkbox", `in-${blockId}`, attributes);
    default: return el("div", { class: "unsupported", text: `[${item.type} input]` });
  }
}

// A multi-line input as tall as its text (about 60 characters a line), from 3 to 15 rows.
function rowsFor(text) {
  const lines = String(text ?? "").split("\n").reduce((n, line) => n + Math.max(1, Math.ceil(line.length / 60)), 0);
  return Math.min(15, Math.max(3, lines));
}

// What the person entered in one input, as /sandbox/submit wants it (undefined: untouched).
function valueOf(node) {
  const kind = node.dataset.kind;
  if (kind === "radio_buttons") return node.querySelector("input:checked")?.value;
  if (kind === "checkboxes") return [...node.querySelectorAll("input:checked")].map((i) => i.value);
  if (node.tagName === "SELECT" && node.multiple) return [...node.selectedOptions].map((o) => o.value);
  if (node.tagName === "SELECT") return node.value || undefined;
  return node.value;
}

function modalNode(view) {
  const form = el("form", { class: "modal-body", novalidate: true }, blocks(view.blocks, { view }));
  const error = el("div", { class: "modal-error", "data-testid": "modal-error", role: "alert", hidden: true });
  const submit = view.submit ? el("button", { type: "submit", class: "btn primary", "data-testid": "modal-submit", text: plain(view.submit) }) : null;
  const close = () => post("/sandbox/close", { view_id: view.id });
  form.append(error, el("footer", { class: "modal-footer" },
    el("button", { type: "button", class: "btn", "data-testid": "modal-close", text: view.close ? plain(view.close) : "Cancel", onclick: close }),
    submit));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    if (submit && !submit.disabled) submitModal(view, form, submit, error);
  });
  return el("div", { class: "modal", role: "dialog", "aria-modal": "true", "data-testid": "modal", "data-view-id": view.id },
    el("header", { class: "modal-header" },
      el("h2", { "data-testid": "modal-title", icons: plain(view.title) }),
      el("button", { type: "button", class: "icon-button", "data-testid": "modal-x", "aria-label": "Close", text: "×", onclick: close })),
    form);
}

async function submitModal(view, form, submit, error) {
  const values = {};
  const errors = {};
  for (const wrap of form.querySelectorAll("[data-input-block]")) {
    const id = wrap.dataset.inputBlock;
    const input = wrap.querySelector("[data-testid=modal-input]");
    if (!input) continue; // an input the sandbox cannot draw
    const value = valueOf(input);
    const empty = value === undefined || (Array.isArray(value) ? value.length === 0 : value.trim() === "");
    if (empty && !wrap.dataset.optional) errors[id] = REQUIRED;
    if (value !== undefined) values[id] = value;
  }
  showFieldErrors(form, errors, error, "");
  if (Object.keys(errors).length) return;
  submit.disabled = true;
  const answer = await post("/sandbox/submit", { view_id: view.id, values });
  submit.disabled = false;
  if (!answer.ok) showFieldErrors(form, answer.errors ?? {}, error, answer.errors ? "" : answer.error);
}

function showFieldErrors(form, errors, general, message) {
  for (const node of form.querySelectorAll("[data-error-for]")) {
    const text = errors[node.dataset.errorFor];
    node.textContent = text ?? "";
    node.hidden = !text;
    node.parentElement.classList.toggle("has-error", Boolean(text));
  }
  general.textContent = message ?? "";
  general.hidden = !message;
}

function confirmDialog(confirm) {
  const overlay = byTestId("confirm-overlay");
  return new Promise((resolve) => {
    // Escape, or a click beside the dialog, cancels; the focus starts on the safe choice,
    // so Enter alone never rejects.
    const onKey = (event) => {
      if (event.key !== "Escape") return;
      event.preventDefault();
      event.stopPropagation();
      done(false);
    };
    const done = (yes) => {
      document.removeEventListener("keydown", onKey, true);
      overlay.onclick = null;
      overlay.hidden = true;
      overlay.replaceChildren();
      resolve(yes);
    };
    document.addEventListener("keydown", onKey, true);
    overlay.onclick = (event) => { if (event.target === overlay) done(false); };
    overlay.replaceChildren(el("div", { class: "modal confirm", role: "alertdialog", "data-testid": "confirm-dialog" },
      el("header", { class: "modal-header" }, el("h2", { icons: plain(confirm.title) || "Are you sure?" })),
      el("div", { class: "modal-body" }, textObject(confirm.text)),
      el("footer", { class: "modal-footer" },
        el("button", { type: "button", class: "btn", "data-testid": "confirm-no", text: plain(confirm.deny) || "Cancel", onclick: () => done(false) }),
        el("button", { type: "button", class: `btn ${confirm.style ?? "primary"}`, "data-testid": "confirm-yes", text: plain(confirm.confirm) || "Yes", onclick: () => done(true) }))));
    overlay.hidden = false;
    overlay.querySelector("[data-testid=confirm-no]").focus();
  });
}

// -- messages ---------------------------------------------------------------------------------

function messageNode(message, inThread) {
  const author = userName(message.user);
  const body = message.blocks.length ? blocks(message.blocks, { ts: message.ts, inThread }) : [mrkdwn(message.text)];
  const files = message.files.map((file) => el("a", { class: "file", href: file.url, download: file.name, "data-testid": "file-link" },
    el("span", { class: "file-icon", icons: "📄" }), el("span", { class: "file-title", text: file.title }), el("small", { text: `${file.size} bytes` })));
  const replies = !inThread && message.reply_count > 0
    ? el("button", { type: "button", class: "replies-link", "data-testid": "replies-link", text: `${message.reply_count} ${message.reply_count === 1 ? "reply" : "replies"}`, onclick: () => openThread(message.ts) })
    : null;
  const replyHere = !inThread && !message.ephemeral
    ? el("div", { class: "hover-actions" }, el("button", { type: "button", "data-testid": "reply-in-thread", text: "Reply in thread", onclick: () => openThread(message.ts) }))
    : null;
  const kind = `${message.is_bot ? " bot" : ""}${message.ephemeral ? " ephemeral" : ""}`;
  return el("div", { class: `message${kind}`, "data-testid": "message", "data-ts": message.ts, "data-user": message.user, "data-ephemeral": message.ephemeral ? "true" : null },
    el("div", { class: "avatar", "aria-hidden": "true", text: author.slice(0, 1).toUpperCase() }),
    el("div", { class: "message-main" },
      message.ephemeral ? el("div", { class: "ephemeral-note", "data-testid": "ephemeral-note", icons: "👁 Only visible to you" }) : null,
      el("div", { class: "meta" },
        el("span", { class: "author", "data-testid": "message-author", text: author }),
        message.is_bot ? el("span", { class: "app-badge", text: "APP" }) : null,
        el("time", { "data-testid": "message-time", text: timeOf(message.ts) }),
        message.edited ? el("span", { class: "edited", text: "(edited)" }) : null),
      el("div", { class: "message-body", "data-testid": "message-body" }, body, files),
      replies),
    replyHere);
}

function channelItems(state) {
  const notes = state.ephemerals.filter((e) => !e.thread_ts);
  return [...state.messages, ...notes].sort(byTs);
}

function threadItems(state, ts) {
  const parent = state.messages.find((m) => m.ts === ts);
  if (!parent) return null;
  const notes = state.ephemerals.filter((e) => e.thread_ts === ts);
  return [parent, ...[...parent.replies, ...notes].sort(byTs)];
}

// Change a list only where what it shows changed; keep the reader's place (or stay at the
// bottom when they were there). A message that did not change keeps its very node: a click
// whose mousedown and mouseup straddle a redraw would otherwise be lost (the bot edits the
// thread's root message right after posting a review, say).
function redraw(slot, list, items, draw) {
  const key = JSON.stringify([items, page.state.users, page.state.channels]);
  if (page.drawn[slot] === key) return;
  page.drawn[slot] = key;
  const atBottom = list.scrollHeight - list.scrollTop - list.clientHeight < 40;
  const top = list.scrollTop;
  const cache = page.nodes[slot] || new Map();
  const kept = new Map();
  const keep = (message, make) => {
    const id = `${message.ts}:${message.ephemeral ? "e" : "m"}`;
    const json = JSON.stringify([message, page.state.users, page.state.channels]);
    const known = cache.get(id);
    const node = known && known.json === json ? known.node : make();
    kept.set(id, { json, node });
    return node;
  };
  const nodes = draw(items, keep);
  page.nodes[slot] = kept;
  nodes.forEach((node, i) => {
    if (list.children[i] !== node) list.insertBefore(node, list.children[i] || null);
  });
  while (list.children.length > nodes.length) list.lastElementChild.remove();
  list.scrollTop = atBottom ? list.scrollHeight : top;
}

function render() {
  const state = page.state;
  document.title = `#${state.channel.name} · ${state.workspace.name}`;
  byTestId("workspace-name").textContent = state.workspace.name;
  byTestId("me").textContent = state.me.name;
  for (const node of document.querySelectorAll(".channel-name")) node.textContent = state.channel.name;
  byTestId("composer").placeholder = `Message #${state.channel.name} (try /crew help)`;
  redraw("channel", byTestId("messages"), channelItems(state), (items, keep) =>
    items.length ? items.map((m) => keep(m, () => messageNode(m, false)))
      : [el("div", { class: "intro", text: `This is the very beginning of #${state.channel.name}. Type /crew help to start.` })]);
  renderThread();
  renderModal();
  renderHome();
}

// The app's Home tab: the view the bot published to this person (views.publish), drawn
// like a message's blocks; a link to a message of the channel opens its thread here.
function renderHome() {
  byTestId("home-pane").hidden = !page.home;
  document.querySelector(".channel-pane").hidden = page.home;
  byTestId("home-link").classList.toggle("active", page.home);
  byTestId("channel-link").classList.toggle("active", !page.home);
  const view = page.state.home;
  const key = view ? `${view.id}:${view.hash}` : null;
  if (!page.home || key === page.homeKey) return;
  page.homeKey = key;
  byTestId("home-view").replaceChildren(...(view ? blocks(view.blocks, {}) : [el("div", { class: "intro", text: "Loading…" })]));
}

function showHome(shown) {
  page.home = shown;
  page.homeKey = undefined;
  if (shown) post("/sandbox/home", {});
  renderHome();
}

function followLink(event) {
  const link = event.target.closest("a");
  const found = link && /\/archives\/([^/]+)\/p(\d+)(\d{6})(?:\?thread_ts=([\d.]+))?/.exec(link.href);
  if (!found || found[1] !== page.state.channel.id) return;
  event.preventDefault();
  showHome(false);
  openThread(found[4] ?? `${found[2]}.${found[3]}`);
}

function renderThread() {
  const pane = byTestId("thread-pane");
  const items = page.threadTs ? threadItems(page.state, page.threadTs) : null;
  if (!items) {
    page.threadTs = null;
    pane.hidden = true;
    page.drawn.thread = null;
    page.nodes.thread = null;
    return;
  }
  pane.hidden = false;
  pane.dataset.threadTs = page.threadTs;
  redraw("thread", byTestId("thread-messages"), items, ([parent, ...rest], keep) => [
    keep(parent, () => messageNode(parent, true)),
    keep({ ts: "divider", count: parent.reply_count }, () =>
      el("div", { class: "thread-divider", text: `${parent.reply_count} ${parent.reply_count === 1 ? "reply" : "replies"}` })),
    ...rest.map((m) => keep(m, () => messageNode(m, true))),
  ]);
}

function openThread(ts) {
  page.threadTs = ts;
  page.drawn.thread = null;
  page.nodes.thread = null;
  renderThread();
  const list = byTestId("thread-messages");
  list.scrollTop = list.scrollHeight;
  byTestId("thread-composer").focus();
}

function renderModal() {
  const views = page.state.views;
  const view = views[views.length - 1];
  const key = view ? `${view.id}:${view.hash}` : null;
  if (key === page.modalKey) return;
  page.modalKey = key;
  const overlay = byTestId("modal-overlay");
  overlay.replaceChildren(...(view ? [modalNode(view)] : []));
  overlay.hidden = !view;
  keepTyped(overlay, view?.id);
  overlay.querySelector("[data-testid=modal-input]")?.focus();
}

// What a person types in a modal is kept in this tab (sessionStorage) while the modal is
// open: reopened after a reload, or drawn again, it shows what was typed, and says so.
const TYPED = "countersign-modal:";
function keepTyped(overlay, viewId) {
  for (const key of Object.keys(sessionStorage)) {
    if (key.startsWith(TYPED) && key !== TYPED + viewId) sessionStorage.removeItem(key);
  }
  const form = overlay.querySelector("form");
  if (!viewId || !form) return;
  const saved = JSON.parse(sessionStorage.getItem(TYPED + viewId) ?? "{}");
  const texts = [...form.querySelectorAll("textarea[data-block-id], input[data-block-id]:not([type=radio]):not([type=checkbox])")];
  let restored = false;
  for (const input of texts) {
    const id = input.dataset.blockId;
    if (Object.hasOwn(saved, id) && input.value !== saved[id]) {
      input.value = saved[id];
      restored = true;
    }
  }
  if (restored) {
    form.prepend(el("div", { class: "hint", "data-testid": "modal-restored", text: "Restored what you typed before the page reloaded." }));
  }
  form.addEventListener("input", (event) => {
    const id = event.target.dataset?.blockId;
    if (!id || !texts.includes(event.target)) return;
    const now = JSON.parse(sessionStorage.getItem(TYPED + viewId) ?? "{}");
    now[id] = event.target.value;
    sessionStorage.setItem(TYPED + viewId, JSON.stringify(now));
  });
}

// -- talking to the stand-in ------------------------------------------------------------------

function refresh() {
  if (page.refreshing) {
    page.again = true;
    return page.refreshing;
  }
  page.refreshing = (async () => {
    do {
      page.again = false;
      const response = await fetch("/sandbox/state", { cache: "no-store" });
      if (!response.ok) throw new Error(`state: HTTP ${response.status}`);
      page.state = await response.json();
      render();
    } while (page.again);
  })()
    .catch((error) => setConnection(`offline (${error.message})`))
    .finally(() => { page.refreshing = null; });
  return page.refreshing;
}

async function post(path, body) {
  let answer;
  try {
    const response = await fetch(path, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
    answer = await response.json().catch(() => ({ ok: false, error: `HTTP ${response.status}` }));
  } catch {
    answer = { ok: false, error: "The sandbox is not reachable; is it still running?" };
  }
  await refresh();
  return answer;
}

async function click(node, ctx, block, item, value) {
  node.disabled = true;
  const body = { ts: ctx.ts, action_id: item.action_id, block_id: block.block_id };
  if (value !== undefined) body.value = value;
  const answer = await post("/sandbox/click", body);
  node.disabled = false;
  if (!answer.ok) notify(ctx.inThread ? "thread-notice" : "notice", answer.error);
}

function notify(id, message, kind = "error") {
  const node = byTestId(id);
  node.textContent = message;
  node.className = `notice ${kind}`;
  node.hidden = false;
  clearTimeout(node.timer);
  node.timer = setTimeout(() => { node.hidden = true; }, 8000);
}

function setConnection(text) {
  byTestId("connection").textContent = text;
}

function composer(formId, inputId, noticeId, threadTs) {
  const form = byTestId(formId);
  const input = byTestId(inputId);
  const grow = () => { input.style.height = "auto"; input.style.height = `${Math.min(input.scrollHeight, 200)}px`; };
  const send = async () => {
    const text = input.value;
    if (!text.trim()) return;
    input.value = "";
    grow();
    const where = threadTs();
    const answer = await post("/sandbox/send", where ? { text, thread_ts: where } : { text });
    if (!answer.ok) notify(noticeId, answer.error);
    else if (answer.warning) notify(noticeId, answer.warning, "warning");
  };
  form.addEventListener("submit", (event) => { event.preventDefault(); send(); });
  input.addEventListener("input", grow);
  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      send();
    }
  });
}

function listen() {
  const source = new EventSource("/sandbox/events");
  source.addEventListener("open", () => setConnection("live"));
  source.addEventListener("error", () => setConnection("reconnecting…"));
  source.addEventListener("message", (event) => {
    const { version } = JSON.parse(event.data);
    if (page.state?.version !== version) refresh();
  });
}

function start() {
  composer("composer-form", "composer", "notice", () => null);
  composer("thread-composer-form", "thread-composer", "thread-notice", () => page.threadTs);
  byTestId("thread-close").addEventListener("click", () => { page.threadTs = null; renderThread(); });
  byTestId("home-link").addEventListener("click", () => showHome(true));
  byTestId("channel-link").addEventListener("click", () => showHome(false));
  byTestId("home-view").addEventListener("click", followLink);
  document.addEventListener("keydown", (event) => {
    const modal = document.querySelector("[data-testid=modal]");
    if (event.key === "Escape" && modal && byTestId("confirm-overlay").hidden) {
      post("/sandbox/close", { view_id: modal.dataset.viewId });
    }
  });
  refresh();
  listen();
}

start();
