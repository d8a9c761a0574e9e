// Sorting, filtering, evidence toggles and the URL fragment for the compatibility matrix. Each architecture
// is its own <tbody> (summary row + evidence row), so sorting moves both rows together. The fragment holds
// either a row anchor (#arch-llama) or the filter and sort state (#q=...&verdict=...&sort=rc0&dir=desc),
// so a link reproduces what its sender saw.
(function () {
  "use strict";
  const table = document.getElementById("matrix");
  const bodies = () => Array.from(table.querySelectorAll("tbody.arch"));
  const control = (id) => document.getElementById(id);
  const CHANGE_KINDS = ["fixed", "regressed", "changed", "new", "missing"];
  // Filter controls and their fragment keys.
  const FILTERS = { q: "f-search", verdict: "f-verdict", bucket: "f-bucket", band: "f-band",
    rc: "f-recompiles", gb: "f-breaks", change: "f-change" };
  const hubTable = JSON.parse(document.getElementById("hub-table").textContent).map(
    ([pattern, modelType]) => [globToRegExp(pattern), modelType]);
  let sortState = null;

  function globToRegExp(pattern) {
    const escaped = pattern.replace(/[.+^${}()|[\]\\]/g, "\\$&").replace(/\*/g, ".*").replace(/\?/g, ".");
    return new RegExp("^" + escaped + "$");
  }

  // A Hub id finds its architecture through the same bundled table the checklist uses.
  function architectureOfHubId(query) {
    if (!query.includes("/")) return null;
    const hit = hubTable.find(([pattern]) => pattern.test(query));
    return hit ? hit[1] : null;
  }

  function sortBy(header, direction) {
    const key = header.dataset.sort;
    const numeric = header.dataset.type === "num";
    const descending = direction === "descending";
    table.querySelectorAll("th[data-sort]").forEach((other) => other.setAttribute("aria-sort", "none"));
    header.setAttribute("aria-sort", descending ? "descending" : "ascending");
    sortState = { key: key, dir: descending ? "desc" : "asc" };
    const read = (body) => {
      const raw = body.dataset[key];
      if (raw === undefined || raw === "") return null;
      return numeric ? Number(raw) : raw;
    };
    const sorted = bodies().sort((a, b) => {
      const x = read(a), y = read(b);
      // Missing and unmeasured values stay at the bottom whichever the direction.
      if (x === null || y === null) return (x === null) - (y === null);
      const order = numeric ? x - y : x.localeCompare(y);
      return descending ? -order : order;
    });
    sorted.forEach((body) => table.appendChild(body));
  }

  function toggleSort(header) {
    sortBy(header, header.getAttribute("aria-sort") === "ascending" ? "descending" : "ascending");
    saveState();
  }

  // Per-run measured values; "" is "not measured", which neither "none" nor "1 or more" matches.
  function countMatches(values, threshold, everyStep) {
    if (threshold === "") return true;
    if (threshold === "step") return everyStep;
    if (threshold === "null") return values.some((value) => value === "");
    const measured = values.filter((value) => value !== "").map(Number);
    if (threshold === "0") return measured.some((value) => value === 0);
    return measured.some((value) => value >= Number(threshold));
  }

  function value(id) { return control(id) ? control(id).value : ""; }

  function applyFilters() {
    const query = value("f-search").trim().toLowerCase();
    const verdict = value("f-verdict");
    const bucket = value("f-bucket");
    const band = value("f-band");
    const recompiles = value("f-recompiles");
    const breaks = value("f-breaks");
    const change = value("f-change");
    const hubArchitecture = architectureOfHubId(query);
    control("search-hint").textContent = hubArchitecture
      ? value("f-search").trim() + " is " + hubArchitecture + " (bundled table of Hub ids)" : "";
    let shown = 0;
    bodies().forEach((body) => {
      const verdicts = body.dataset.verdicts.split(" ");
      const buckets = body.dataset.buckets.split(" ");
      const changes = body.dataset.changes ? body.dataset.changes.split(" ") : [];
      const visible =
        (!query || body.dataset.search.includes(query) || body.dataset.model === hubArchitecture) &&
        (!verdict || (verdict === "not-works" ? verdicts.some((v) => v !== "works" && v !== "none") : verdicts.includes(verdict))) &&
        (!bucket || buckets.includes(bucket)) &&
        (!band || body.dataset.band === band) &&
        countMatches(body.dataset.recompiles.split(" "), recompiles, body.dataset.everyStep === "yes") &&
        countMatches(body.dataset.breaks.split(" "), breaks, false) &&
        (!change || (change === "any" ? changes.some((c) => CHANGE_KINDS.includes(c)) : changes.includes(change)));
      body.hidden = !visible;
      if (visible) shown += 1;
    });
    control("shown").textContent = String(shown);
  }

  function saveState() {
    const params = new URLSearchParams();
    Object.entries(FILTERS).forEach(([key, id]) => { if (value(id)) params.set(key, value(id)); });
    if (sortState) { params.set("sort", sortState.key); params.set("dir", sortState.dir); }
    const fragment = params.toString();
    history.replaceState(null, "", fragment ? "#" + fragment : location.pathname + location.search);
  }

  function loadState(fragment) {
    const params = new URLSearchParams(fragment);
    Object.entries(FILTERS).forEach(([key, id]) => { if (control(id)) control(id).value = params.get(key) || ""; });
    const header = params.get("sort") && table.querySelector('th[data-sort="' + CSS.escape(params.get("sort")) + '"]');
    if (header) sortBy(header, params.get("dir") === "desc" ? "descending" : "ascending");
    applyFilters();
  }

  function toggle(body, open) {
    const evidence = body.querySelector("tr.evidence");
    if (!evidence) return;
    evidence.hidden = !open;
    body.querySelectorAll("button.evidence-toggle").forEach((b) => b.setAttribute("aria-expanded", String(open)));
  }

  // #arch-<model>: show that row even if a filter hid it, open its evidence, and scroll to it.
  function followAnchor() {
    const id = decodeURIComponent(location.hash.slice(1));
    if (!id.startsWith("arch-")) return false;
    const body = document.getElementById(id);
    if (!body) return true;
    body.hidden = false;
    toggle(body, true);
    // The row's own line goes to the top, just under the sticky header (its evidence may be taller than
    // the box, and centring it would scroll the row itself out of sight). The margin also holds for the
    // browser's own jump to the fragment, which may come after this.
    body.style.scrollMarginTop = table.tHead.offsetHeight + "px";
    body.scrollIntoView({ block: "start" });
    return true;
  }

  table.querySelectorAll("th[data-sort]").forEach((header) => {
    header.addEventListener("click", () => toggleSort(header));
    header.addEventListener("keydown", (event) => {
      if (event.key === "Enter" || event.key === " ") { event.preventDefault(); toggleSort(header); }
    });
  });
  table.addEventListener("click", (event) => {
    const button = event.target.closest("button.evidence-toggle");
    if (!button) return;
    toggle(button.closest("tbody"), button.getAttribute("aria-expanded") !== "true");
  });
  document.querySelectorAll(".filters input, .filters select").forEach((element) => {
    const changed = () => { applyFilters(); saveState(); };
    element.addEventListener("input", changed);
    element.addEventListener("change", changed);
  });
  control("expand-all").addEventListener("click", () => {
    const visible = bodies().filter((body) => !body.hidden);
    const open = visible.some((body) => {
      const evidence = body.querySelector("tr.evidence");
      return evidence && evidence.hidden;
    });
    visible.forEach((body) => toggle(body, open));
  });
  control("reset-filters").addEventListener("click", () => {
    document.querySelectorAll(".filters input").forEach((input) => { input.value = ""; });
    document.querySelectorAll(".filters select").forEach((select) => { select.value = ""; });
    applyFilters();
    saveState();
  });
  window.addEventListener("hashchange", () => { if (!followAnchor()) loadState(location.hash.slice(1)); });
  if (!followAnchor()) loadState(location.hash.slice(1));
})();
