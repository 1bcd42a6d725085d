// Dropped tables and views of a catalog, kept for the drop retention: undrop one (under
// its old name or a new one) or purge it now.

import { call, enc, get } from "./api.js";
import { fmtTime, form, h, notice, section, show, table } from "./dom.js";
import { catalogTabs, crumbs } from "./browse.js";

export async function droppedPage(catalog, message) {
  const base = `/api/management/v1/catalogs/${enc(catalog)}/dropped`;
  const { dropped } = await get(base);
  const again = (text) => droppedPage(catalog, text);
  show(
    crumbs(catalog),
    h("h1", {}, `${catalog}: dropped tables and views`),
    catalogTabs(catalog, "dropped"),
    message && notice("ok", message),
    section("Recoverable until they expire",
      table(["Type", "Name", "Dropped", "Expires", "Purge requested", ""], dropped.map((d) => {
        const name = [...d.namespace, d.name].join(".");
        return h("tr", { "data-dropped-id": d.id, "data-name": name },
          h("td", {}, d.type), h("td", {}, name), h("td", {}, fmtTime(d["dropped-at-ms"])),
          h("td", {}, fmtTime(d["expires-at-ms"])), h("td", {}, d["purge-requested"] ? "yes" : "no"),
          h("td", {},
            form([{ name: "to", label: "Undrop as", placeholder: "same name, or ns.name" }], "Undrop", async (v) => {
              const to = v.to.trim();
              const parts = to.split(".");
              const body = to ? { namespace: parts.slice(0, -1), name: parts[parts.length - 1] } : undefined;
              await call("POST", `${base}/${enc(d.id)}/undrop`, body);
              await again(`Restored ${to || name}.`);
            }, { class: "inline undrop" }),
            h("button", {
              class: "danger",
              onclick: async () => {
                if (!window.confirm(`Purge ${name} now? Its files are deleted once the retention has passed.`)) return;
                try {
                  await call("DELETE", `${base}/${enc(d.id)}`);
                  await again(`Purged ${name}.`);
                } catch (e) {
                  document.getElementById("main").prepend(notice("error", e.message));
                }
              },
            }, "Purge")));
      }), { "data-testid": "dropped", empty: "Nothing dropped (or the drop retention is off)." })),
  );
}
