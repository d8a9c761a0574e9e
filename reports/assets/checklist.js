// Progress counter for the checklist. Ticks persist in this browser's localStorage (per page path), stored
// under each item's data-key: a hash of its rule, file, line text and message. Regenerating the checklist
// after a file changes leaves every unchanged item's tick on it, and never moves a tick to another item.
(function () {
  "use strict";
  const items = Array.from(document.querySelectorAll("li.task[data-key]"));
  const storageKey = "neuron-migrate-checklist:" + location.pathname;
  let saved = {};
  try { saved = JSON.parse(localStorage.getItem(storageKey) || "{}"); } catch (error) { saved = {}; }

  function update() {
    // Keep ticks of items this version does not show (they may come back), drop unticked ones.
    items.forEach((item) => {
      const box = item.querySelector("input[type=checkbox]");
      item.classList.toggle("checked", box.checked);
      if (box.checked) saved[item.dataset.key] = true; else delete saved[item.dataset.key];
    });
    const done = items.filter((item) => item.classList.contains("checked")).length;
    document.getElementById("done").textContent = String(done);
    try { localStorage.setItem(storageKey, JSON.stringify(saved)); } catch (error) { /* storage disabled */ }
  }

  items.forEach((item) => {
    const box = item.querySelector("input[type=checkbox]");
    box.checked = Boolean(saved[item.dataset.key]);
    box.addEventListener("change", update);
  });
  document.getElementById("total-tasks").textContent = String(items.length);
  update();
})();
