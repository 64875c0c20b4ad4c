// StreamHTML: one piece of HTML that grows while a run streams (an assistant reply, a
// command's output), shown without resending what the browser already has.
//
// The kernel sends one custom message per flush: {seal, append, keep, tail}. `seal` moves
// the first `seal` characters of the tail to the final part (a block that is finished);
// `append` is more final HTML (finished Markdown blocks, complete output lines), added once
// and never sent again. The tail (the block still being written) is then replaced by its
// first `keep` characters plus `tail`. When the text is complete the kernel sets the `value`
// trait to the whole HTML, which replaces both parts (and is what a saved widget keeps);
// {reset} does the same when that value has not changed.
// The HTML was escaped and rendered in the kernel; it is inserted as is.

export default () => {
  let sealed = "";
  let tail = "";
  const views = new Set();

  return {
    initialize({ model }) {
      sealed = model.get("value");
      tail = model.get("initial_tail");
      model.on("msg:custom", (message) => {
        if (message.reset !== undefined) {
          sealed = message.reset;
          tail = "";
          for (const view of views) view.reset();
          return;
        }
        let appended = message.append || "";
        if (message.seal) {
          appended = tail.slice(0, message.seal) + appended;
          tail = tail.slice(message.seal);
        }
        sealed += appended;
        if (message.tail !== undefined) {
          tail = tail.slice(0, message.keep || 0) + message.tail;
        }
        for (const view of views) view.update(appended);
      });
      model.on("change:value", () => {
        sealed = model.get("value");
        tail = "";
        for (const view of views) view.reset();
      });
    },

    render({ model, el }) {
      const inPre = model.get("tag") === "pre";
      const root = document.createElement(inPre ? "pre" : "div");
      root.className = "awf-stream";
      const sealedPart = document.createElement(inPre ? "span" : "div");
      const tailPart = document.createElement(inPre ? "span" : "div");
      root.append(sealedPart, tailPart);
      el.append(root);
      const view = {
        reset() {
          sealedPart.innerHTML = sealed;
          tailPart.innerHTML = tail;
        },
        update(appended) {
          if (appended) sealedPart.insertAdjacentHTML("beforeend", appended);
          tailPart.innerHTML = tail;
        },
      };
      view.reset();
      views.add(view);
      return () => views.delete(view);
    },
  };
};
