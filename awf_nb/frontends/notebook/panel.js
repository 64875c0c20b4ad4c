// Enter sends, Shift+Enter inserts a new line: ipywidgets' Textarea has no key events on
// the kernel side, so a page-wide listener (installed once) does it in the browser. The
// `change` event first syncs the box's value, then the Send click follows it over the same
// connection, so the kernel sees the text before the click. After a send the kernel puts a
// fresh text box in place (see `RunPanel._renew_text_box`); the listener focuses it.
(function () {
  if (window.__awfPanelKeys) { return; }
  window.__awfPanelKeys = true;
  function focusNextBox(panel, old) {
    var tries = 0;
    var timer = setInterval(function () {
      var box = panel.querySelector('.awf-input textarea');
      var fresh = box && box !== old && box.value === '';
      if (fresh || ++tries > 40) {
        clearInterval(timer);
        if (fresh) { box.focus(); }
      }
    }, 50);
  }
  document.addEventListener('keydown', function (e) {
    if (e.key !== 'Enter' || e.shiftKey || e.altKey || e.ctrlKey || e.metaKey || e.isComposing) {
      return;
    }
    var box = e.target;
    if (!box || box.tagName !== 'TEXTAREA' || !box.closest) { return; }
    var panel = box.closest('.awf-panel');
    var send = panel && panel.querySelector('button.awf-send');
    if (!send || send.disabled) { return; }
    e.preventDefault();
    e.stopPropagation();
    box.dispatchEvent(new Event('change', { bubbles: true }));
    send.click();
    focusNextBox(panel, box);
  }, true);
  document.addEventListener('click', function (e) {
    var send = e.target && e.target.closest && e.target.closest('button.awf-send');
    var panel = send && send.closest('.awf-panel');
    if (panel && e.isTrusted) {
      focusNextBox(panel, panel.querySelector('.awf-input textarea'));
    }
  }, true);
})();
