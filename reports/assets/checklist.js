// Progress counter for the checklist. Ticks persist in this browser's localStorage (per page path), stored
// under each item's data-key: a hash of its rule, file, line text and message. Regenerating the checklist
// after a file changes leaves every unchanged item's tick on it, and never moves a tick to another item.
(function () {
  "use strict";
  const items = Array.from(document.querySelectorAll("li.task[data-key]"));
  const storageKey = "neuron-migrate-checklist:" + location.pathname;
  let saved = {};
  try { saved = JSON.parse(localStorage.getItem(storageKey) || "{}"); } catch (error) { saved = {}; }

  function show() {
    items.forEach((item) => item.classList.toggle("checked", item.querySelector("input[type=checkbox]").checked));
    const done = items.filter((item) => item.classList.contains("checked")).length;
    document.getElementById("done").textContent = String(done);
  }

  function save(item, checked) {
    // Only a tick or untick writes: a load that wrote what it had read could overwrite a tick another page
    // (or this page before a reload) stored a moment earlier. Ticks of items this version does not show stay.
    try { saved = JSON.parse(localStorage.getItem(storageKey) || "{}"); } catch (error) { saved = {}; }
    if (checked) saved[item.dataset.key] = true; else delete saved[item.dataset.key];
    try { localStorage.setItem(storageKey, JSON.stringify(saved)); } catch (error) { /* storage disabled */ }
  }

  items.forEach((item) => {
    const box = item.querySelector("input[type=checkbox]");
    box.checked = Boolean(saved[item.dataset.key]);
    box.addEventListener("change", () => { save(item, box.checked); show(); });
  });
  document.getElementById("total-tasks").textContent = String(items.length);
  show();
})();
