// Progress counter for the checklist; ticks persist in this browser's localStorage (per file path).
(function () {
  "use strict";
  const boxes = Array.from(document.querySelectorAll("li.task input[type=checkbox]"));
  const storageKey = "neuron-migrate-checklist:" + location.pathname;
  let saved = {};
  try { saved = JSON.parse(localStorage.getItem(storageKey) || "{}"); } catch (error) { saved = {}; }

  function update() {
    const state = {};
    let done = 0;
    boxes.forEach((box) => {
      box.closest("li.task").classList.toggle("checked", box.checked);
      if (box.checked) { done += 1; state[box.id] = true; }
    });
    document.getElementById("done").textContent = String(done);
    try { localStorage.setItem(storageKey, JSON.stringify(state)); } catch (error) { /* storage disabled */ }
  }

  boxes.forEach((box) => {
    box.checked = Boolean(saved[box.id]);
    box.addEventListener("change", update);
  });
  document.getElementById("total-tasks").textContent = String(boxes.length);
  update();
})();
