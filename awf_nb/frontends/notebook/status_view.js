// StatusLine (status_view.py): the run panel's status line. The kernel sends its HTML when
// something changes (the step, the tokens); the elapsed time in it (the `.awf-elapsed`
// span) ticks here, in the browser, so it moves on once a second however busy the kernel
// is streaming a reply, and costs no message. It counts from the kernel's `elapsed` at the
// last update, on this page's own clock (the two machines' clocks need not agree).

function format(seconds) {
  const whole = Math.floor(seconds);
  if (whole < 60) return `${whole} s`;
  const minutes = Math.floor(whole / 60);
  if (minutes < 60) return `${minutes} min ${String(whole % 60).padStart(2, "0")} s`;
  return `${Math.floor(minutes / 60)} h ${String(minutes % 60).padStart(2, "0")} min`;
}

export default {
  render({ model, el }) {
    let timer = null;
    let base = 0;
    let since = 0;
    const tick = () => {
      const span = el.querySelector(".awf-elapsed");
      if (span) span.textContent = format(base + (performance.now() - since) / 1000);
    };
    const redraw = () => {
      el.innerHTML = model.get("value");
      base = model.get("elapsed");
      since = performance.now();
      clearInterval(timer);
      timer = model.get("running") ? setInterval(tick, 250) : null;
    };
    model.on("change:value", redraw);
    model.on("change:running", redraw);
    redraw();
    return () => clearInterval(timer);
  },
};
