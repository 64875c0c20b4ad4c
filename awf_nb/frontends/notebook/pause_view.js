// PauseControls (panel_pause.py): the text area and buttons of a breakpoint's pause. The
// text stays here until a button is clicked; then the action and the text go to the
// kernel in one message ({action, text}), and every button turns off (one answer a pause).

export default {
  render({ model, el }) {
    const box = document.createElement("div");
    box.className = "awf-pause-value widget-textarea jupyter-widgets";
    const text = document.createElement("textarea");
    text.rows = 3;
    text.value = model.get("value");
    // JupyterLab's shortcuts (Shift+Enter runs the cell) must not see keys typed here.
    text.addEventListener("keydown", (e) => e.stopPropagation());
    box.append(text);
    const row = document.createElement("div");
    row.className = "awf-pause-buttons widget-hbox";
    const buttons = model.get("actions").map(([label, action, css]) => {
      const b = document.createElement("button");
      b.type = "button";
      b.textContent = label;
      b.className = `jupyter-widgets jupyter-button widget-button awf-pause-button ${css}`;
      b.addEventListener("click", () => {
        if (b.disabled) return;
        for (const other of buttons) other.disabled = true;
        model.send({ action, text: text.value });
      });
      return b;
    });
    row.append(...buttons);
    el.append(box, row);
  },
};
