// Composer (composer.py): the run panel's text box and buttons. The text stays here until
// it is sent; then the text and the action go to the kernel in one message
// ({action: "send", text}, or "end", "stop", "cancel"). Enter sends, Shift+Enter adds a
// line (as a chat box: Enter in an empty box sends nothing; the Send button with an empty
// box ends the conversation, as End conversation does). The box is emptied at once, and
// Send waits for the kernel's next `can_send`; a message the kernel could not take comes
// back ({restore}) into the box.

function button(label, style, css, title) {
  const b = document.createElement("button");
  b.type = "button";
  b.textContent = label;
  b.title = title || "";
  b.className = `jupyter-widgets jupyter-button widget-button ${style} ${css}`;
  return b;
}

export default {
  render({ model, el }) {
    let sending = false; // a message is on its way: Send waits for the kernel's answer
    const root = document.createElement("div");
    root.className = "awf-composer";
    const box = document.createElement("div");
    box.className = "awf-input widget-textarea jupyter-widgets";
    const text = document.createElement("textarea");
    text.rows = 2;
    box.append(text);
    const send = button("Send", "mod-primary", "awf-send");
    const end = button("End conversation", "", "awf-end",
      "End the conversation: the step succeeds with the last reply");
    const stop = button("Stop", "mod-warning", "awf-stop",
      "Stop the reply being written (the conversation goes on)");
    const cancel = button("Cancel run", "mod-danger", "awf-cancel",
      "Cancel the whole run (%awf resume continues it)");
    const row = document.createElement("div");
    row.className = "awf-buttons widget-hbox";
    if (model.get("interactive")) {
      root.append(box);
      row.append(send, end);
    }
    row.append(stop, cancel);
    root.append(row);
    el.append(root);

    const draw = () => {
      const open = model.get("can_send") && !sending;
      send.disabled = !open;
      end.disabled = !open;
      stop.disabled = !model.get("can_stop");
      cancel.disabled = !model.get("can_cancel");
      text.placeholder = model.get("placeholder");
    };
    const act = (action, message) => {
      if (action === "send" || action === "end") {
        if (send.disabled) return;
        sending = true;
      }
      model.send(message === undefined ? { action } : { action, text: message });
      draw();
    };
    const sendText = () => {
      const message = text.value;
      text.value = "";
      act("send", message);
    };

    send.addEventListener("click", sendText);
    end.addEventListener("click", () => act("end"));
    stop.addEventListener("click", () => act("stop"));
    cancel.addEventListener("click", () => act("cancel"));
    text.addEventListener("keydown", (e) => {
      if (e.key !== "Enter" || e.shiftKey || e.altKey || e.ctrlKey || e.metaKey ||
          e.isComposing) {
        return;
      }
      e.preventDefault(); // Enter never adds a line; Shift+Enter does (the default)
      e.stopPropagation(); // nor runs the cell, as JupyterLab's Shift+Enter would
      if (text.value.trim() && !send.disabled) sendText();
    });
    // JupyterLab's own shortcuts (Shift+Enter runs the cell) must not see keys typed here.
    text.addEventListener("keydown", (e) => e.stopPropagation());

    const onKernel = () => {
      sending = false;
      draw();
    };
    const onMessage = (message) => {
      if (message.restore === undefined) return;
      if (!text.value) text.value = message.restore;
      onKernel();
    };
    model.on("change:can_send", onKernel);
    model.on("change:can_stop", draw);
    model.on("change:can_cancel", draw);
    model.on("change:placeholder", draw);
    model.on("msg:custom", onMessage);
    draw();
    return () => {
      model.off("change:can_send", onKernel);
      model.off("change:can_stop", draw);
      model.off("change:can_cancel", draw);
      model.off("change:placeholder", draw);
      model.off("msg:custom", onMessage);
    };
  },
};
