// The run panel's behaviour in the browser, installed once per page (the text box and its
// keys are the panel's Composer widget, composer.js):
//
// - The first time a panel asks for a message, its text box takes the focus (a cell run
//   with Shift+Enter leaves it on the next cell), unless the person is typing elsewhere.
// - While a reply grows, the text box and its buttons stay in view, as long as they were
//   in view: a person who scrolled up to read is left where they are.
(function () {
  if (window.__awfPanelKeys) { return; }
  window.__awfPanelKeys = true;

  // --- focus at the first prompt --------------------------------------------------------------

  // Whether the person is busy typing somewhere else (then the focus stays there).
  function typingElsewhere() {
    var active = document.activeElement;
    if (!active || active === document.body) { return false; }
    var editable = active.isContentEditable || active.tagName === 'TEXTAREA' ||
      active.tagName === 'INPUT';
    if (!editable) { return false; }
    var text = active.isContentEditable ? active.textContent : active.value;
    return Boolean(text && text.trim());
  }

  var asked = new WeakSet();  // panels that have asked for a message already
  function onSendEnabled(send) {
    var panel = send.closest('.awf-panel');
    if (!panel || asked.has(panel)) { return; }
    asked.add(panel);
    var box = panel.querySelector('.awf-input textarea');
    if (box && !typingElsewhere()) {
      box.focus({ preventScroll: true });
      bringIntoView(panel);
    }
    watch(panel);
  }

  // --- keeping the text box in view ---------------------------------------------------------

  function scroller(element) {
    for (var node = element.parentElement; node; node = node.parentElement) {
      var style = getComputedStyle(node);
      if (/(auto|scroll)/.test(style.overflowY) && node.scrollHeight > node.clientHeight) {
        return node;
      }
    }
    return document.scrollingElement || document.documentElement;
  }

  // How far below the visible part of its scroller the panel's controls end (<= 0: in view).
  function below(panel) {
    var controls = panel.querySelector('.awf-controls');
    if (!controls) { return null; }
    var area = scroller(panel);
    var bottom = area === document.scrollingElement ? window.innerHeight
      : area.getBoundingClientRect().bottom;
    return { area: area, by: controls.getBoundingClientRect().bottom - bottom };
  }

  function bringIntoView(panel) {
    var found = below(panel);
    if (found && found.by > 0) { found.area.scrollTop += found.by + 8; }
    stuck.set(panel, true);
  }

  var stuck = new WeakMap();  // panel -> its controls were in view at the last look
  var watched = new WeakSet();
  function watch(panel) {
    if (watched.has(panel)) { return; }
    watched.add(panel);
    var found = below(panel);
    stuck.set(panel, Boolean(found && found.by <= 8));
    new ResizeObserver(function () {
      if (stuck.get(panel) && panel.querySelector('.awf-controls')) { bringIntoView(panel); }
    }).observe(panel);
  }
  // A scroll by the person decides whether the panel follows its reply again (looked at
  // once per frame, however many scroll events come).
  var looking = false;
  document.addEventListener('scroll', function () {
    if (looking) { return; }
    looking = true;
    requestAnimationFrame(function () {
      looking = false;
      document.querySelectorAll('.awf-panel .awf-controls').forEach(function (controls) {
        var panel = controls.closest('.awf-panel');
        if (!watched.has(panel)) { return; }
        var found = below(panel);
        stuck.set(panel, Boolean(found && found.by <= 8));
      });
    });
  }, true);

  // The Send button of a panel is enabled when it asks for a message (an attribute change),
  // and a panel with controls is new: both are seen here, without looking at anything else.
  new MutationObserver(function (changes) {
    changes.forEach(function (change) {
      var target = change.target;
      if (change.type === 'attributes' && target.matches && target.matches('button.awf-send') &&
          !target.disabled) {
        onSendEnabled(target);
      }
      if (change.type === 'childList') {
        change.addedNodes.forEach(function (node) {
          if (!node.querySelectorAll) { return; }
          var found = Array.from(node.querySelectorAll('.awf-controls'));
          if (node.matches('.awf-controls')) { found.push(node); }
          found.forEach(function (controls) {
            var panel = controls.closest('.awf-panel');
            if (panel) { watch(panel); }
          });
        });
      }
    });
  }).observe(document.body, {
    subtree: true, childList: true, attributes: true, attributeFilter: ['disabled'],
  });
})();
