// Building the page: elements from plain data, never from HTML strings (names and
// properties are user data, so text always goes in as text), and the few formats the
// pages share.

/** An element: h("a", {href: "#/"}, "text", child, [more children]). */
export function h(tag, props, ...children) {
  const svg = tag.startsWith("svg:");
  const el = svg
    ? document.createElementNS("http://www.w3.org/2000/svg", tag.slice(4))
    : document.createElement(tag);
  for (const [key, value] of Object.entries(props || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (key === "class") el.setAttribute("class", value);
    else if (key in el && !svg && typeof value !== "string") el[key] = value;
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children) {
    if (child === undefined || child === null || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** A titled section of a page. */
export function section(title, ...content) {
  return h("section", { class: "card" }, h("h2", {}, title), ...content);
}

/** A table from a header row and rows of cells (strings or elements). */
export function table(headers, rows, props = {}) {
  if (rows.length === 0) return h("p", { class: "muted", "data-testid": props["data-testid"] }, props.empty || "None.");
  return h(
    "table",
    { class: "grid", ...props, empty: undefined },
    h("thead", {}, h("tr", {}, headers.map((x) => h("th", {}, x)))),
    h("tbody", {}, rows.map((row) => (row instanceof Node ? row : h("tr", {}, row.map((c) => h("td", {}, c)))))),
  );
}

/** Key/value pairs as a two-column list. */
export function pairs(entries, empty = "None.") {
  if (entries.length === 0) return h("p", { class: "muted" }, empty);
  return h("dl", { class: "pairs" }, entries.flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]));
}

/** A message box; kind is "error", "ok" or "info". */
export function notice(kind, ...content) {
  return h("div", { class: `notice ${kind}`, role: kind === "error" ? "alert" : "status" }, ...content);
}

/** Replaces the page's content. */
export function show(...content) {
  const main = document.getElementById("main");
  main.replaceChildren(...content.flat().filter(Boolean));
  window.scrollTo(0, 0);
}

export function fmtTime(ms) {
  if (ms === undefined || ms === null) return "";
  return new Date(Number(ms)).toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC");
}

export function fmtNum(n) {
  if (n === undefined || n === null || n === "") return "";
  const x = Number(n);
  return Number.isFinite(x) ? x.toLocaleString("en-US") : String(n);
}

export function fmtBytes(n) {
  const x = Number(n);
  if (!Number.isFinite(x)) return "";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  let v = x;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i += 1;
  }
  return `${i === 0 ? v : v.toFixed(1)} ${units[i]}`;
}

/** A form whose submit runs `action(values)` and shows its error (or success) inline. */
export function form(fields, label, action, props = {}) {
  const status = h("span", { class: "form-status" });
  const inputs = fields.map((f) =>
    f instanceof Node
      ? f
      : h("label", {}, f.label, f.options
        ? h("select", { name: f.name }, f.options.map((o) => h("option", { value: o }, o)))
        : h("input", { name: f.name, type: f.type || "text", required: f.required, placeholder: f.placeholder || "", autocomplete: "off" })),
  );
  const el = h("form", { class: "inline", ...props }, inputs, h("button", { type: "submit" }, label), status);
  el.addEventListener("submit", async (event) => {
    event.preventDefault();
    const values = Object.fromEntries(new FormData(el).entries());
    status.textContent = "";
    try {
      await action(values);
    } catch (e) {
      status.replaceChildren(notice("error", e.message));
    }
  });
  return el;
}
