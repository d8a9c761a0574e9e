// Sorting, filtering and evidence toggles for the compatibility matrix. Each architecture is its own
// <tbody> (summary row + evidence row), so sorting moves both rows together.
(function () {
  "use strict";
  const table = document.getElementById("matrix");
  const bodies = () => Array.from(table.querySelectorAll("tbody.arch"));
  const control = (id) => document.getElementById(id);
  const CHANGE_KINDS = ["fixed", "regressed", "changed", "new", "missing"];

  function sortBy(header) {
    const key = header.dataset.sort;
    const numeric = header.dataset.type === "num";
    const descending = header.getAttribute("aria-sort") === "ascending";
    table.querySelectorAll("th[aria-sort]").forEach((other) => other.removeAttribute("aria-sort"));
    header.setAttribute("aria-sort", descending ? "descending" : "ascending");
    const read = (body) => {
      const raw = body.dataset[key];
      if (raw === undefined || raw === "") return null;
      return numeric ? Number(raw) : raw;
    };
    const sorted = bodies().sort((a, b) => {
      const x = read(a), y = read(b);
      // Missing values stay at the bottom whichever the direction.
      if (x === null || y === null) return (x === null) - (y === null);
      const order = numeric ? x - y : x.localeCompare(y);
      return descending ? -order : order;
    });
    sorted.forEach((body) => table.appendChild(body));
  }

  function atLeast(value, threshold) {
    if (threshold === "") return true;
    if (threshold === "0") return value === 0;
    return value >= Number(threshold);
  }

  function applyFilters() {
    const query = control("f-search").value.trim().toLowerCase();
    const verdict = control("f-verdict").value;
    const band = control("f-band").value;
    const recompiles = control("f-recompiles").value;
    const breaks = control("f-breaks").value;
    const change = control("f-change") ? control("f-change").value : "";
    let shown = 0;
    bodies().forEach((body) => {
      const verdicts = body.dataset.verdicts.split(" ");
      const changes = body.dataset.changes ? body.dataset.changes.split(" ") : [];
      const visible =
        (!query || body.dataset.search.includes(query)) &&
        (!verdict || (verdict === "not-works" ? verdicts.some((v) => v !== "works" && v !== "none") : verdicts.includes(verdict))) &&
        (!band || body.dataset.band === band) &&
        atLeast(Number(body.dataset.recompiles), recompiles) &&
        atLeast(Number(body.dataset.breaks), breaks) &&
        (!change || (change === "any" ? changes.some((c) => CHANGE_KINDS.includes(c)) : changes.includes(change)));
      body.hidden = !visible;
      if (visible) shown += 1;
    });
    control("shown").textContent = String(shown);
  }

  function toggle(body, open) {
    const evidence = body.querySelector("tr.evidence");
    if (!evidence) return;
    evidence.hidden = !open;
    body.querySelectorAll("button.evidence-toggle").forEach((b) => b.setAttribute("aria-expanded", String(open)));
  }

  table.querySelectorAll("th[data-sort]").forEach((header) => header.addEventListener("click", () => sortBy(header)));
  table.addEventListener("click", (event) => {
    const button = event.target.closest("button.evidence-toggle");
    if (!button) return;
    toggle(button.closest("tbody"), button.getAttribute("aria-expanded") !== "true");
  });
  document.querySelectorAll(".filters input, .filters select").forEach((element) => {
    element.addEventListener("input", applyFilters);
    element.addEventListener("change", applyFilters);
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
  });
  applyFilters();
})();
