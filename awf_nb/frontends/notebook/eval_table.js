// The live table of an eval: one row per (case, epoch), filled in as runs finish.
// Rows come from the kernel (`rows`, a list of {key, outcome, cells, run_id}); clicking a
// row that has a run sets `selected` to its run id, and the kernel shows that run's
// conversation below the table. Colours are JupyterLab's theme variables, so the table
// reads in light and dark themes. Text is inserted as text, never as HTML.

const COLOURS = {
  pass: "var(--jp-success-color1, #388e3c)",
  fail: "var(--jp-error-color1, #d32f2f)",
  error: "var(--jp-layout-color3, #9e9e9e)",
  running: "var(--jp-brand-color1, #1976d2)",
  cancelled: "var(--jp-warn-color1, #f57c00)",
  pending: "var(--jp-layout-color2, #eeeeee)",
};

function render({ model, el }) {
  const root = document.createElement("div");
  root.className = "awf-eval-live";
  const table = document.createElement("table");
  table.className = "awf-eval-table";
  table.style.borderCollapse = "collapse";
  table.style.color = "var(--jp-ui-font-color1, inherit)";
  table.style.fontSize = "var(--jp-ui-font-size1, 13px)";
  root.appendChild(table);
  el.appendChild(root);

  function draw() {
    table.replaceChildren();
    const head = document.createElement("tr");
    for (const name of model.get("header")) {
      const th = document.createElement("th");
      th.textContent = name;
      th.style.textAlign = "left";
      th.style.padding = "2px 8px";
      th.style.borderBottom = "1px solid var(--jp-border-color1, #ccc)";
      head.appendChild(th);
    }
    table.appendChild(head);
    const selected = model.get("selected");
    for (const row of model.get("rows")) {
      const tr = document.createElement("tr");
      tr.className = `awf-eval-row awf-eval-${row.outcome}`;
      tr.dataset.key = row.key;
      tr.style.borderLeft = `4px solid ${COLOURS[row.outcome] || "transparent"}`;
      if (row.run_id) {
        tr.dataset.runId = row.run_id;
        tr.style.cursor = "pointer";
        tr.title = "show this run's conversation";
        tr.addEventListener("click", () => {
          model.set("selected", row.run_id);
          model.save_changes();
        });
      }
      if (row.run_id && row.run_id === selected) {
        tr.style.background = "var(--jp-layout-color2, #eee)";
      }
      row.cells.forEach((cell, index) => {
        const td = document.createElement("td");
        td.textContent = cell;
        td.style.padding = "2px 8px";
        if (index === 2) {
          td.style.color = COLOURS[row.outcome] || "inherit";
          td.style.fontWeight = "bold";
        }
        tr.appendChild(td);
      });
      table.appendChild(tr);
    }
  }

  model.on("change:rows", draw);
  model.on("change:header", draw);
  model.on("change:selected", draw);
  draw();
}

export default { render };
