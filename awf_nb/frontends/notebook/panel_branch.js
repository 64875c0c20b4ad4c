// "Branch from here" in the run panel (see panel_branch.py), installed once per page:
//
// - every message bubble of a panel that can branch (one with a hidden `.awf-branch-request`
//   text widget) and every step's title get a small "Branch from here" button, added by the
//   browser so the panel's widgets are not changed (bubbles of a resumed conversation's
//   earlier part, drawn as one block, get none);
// - a click writes {"section": i, "message": m} (the i-th step of that panel, its m-th
//   bubble; null for the step itself) into the hidden widget; the kernel opens the editor.
(function () {
  if (window.__awfBranchButtons) { return; }
  window.__awfBranchButtons = true;

  var BUBBLES = '.awf-user, .awf-assistant, .awf-partner';
  var TITLES = '.lm-AccordionPanel-title, .jupyter-widget-Collapse-header, .p-Collapse-header';

  function own(panel, selector) {  // the panel's own elements, not a nested branch panel's
    return Array.from(panel.querySelectorAll(selector)).filter(function (el) {
      return el.closest('.awf-panel') === panel;
    });
  }

  function button(kind) {
    var b = document.createElement('button');
    b.type = 'button';
    b.className = 'awf-branch awf-branch-' + kind;
    b.textContent = 'Branch from here';
    b.title = 'Make a new run from here (edit first); this run is not changed';
    return b;
  }

  function decorate(panel) {
    own(panel, '.awf-step').forEach(function (step) {
      var title = step.querySelector(TITLES);
      if (title && !title.querySelector(':scope > .awf-branch')) {
        title.appendChild(button('step'));
      }
      Array.from(step.querySelectorAll(BUBBLES)).forEach(function (bubble) {
        if (bubble.closest('.awf-step') !== step || bubble.closest('.awf-earlier')) { return; }
        if (!bubble.querySelector(':scope > .awf-branch')) {
          bubble.appendChild(button('message'));
        }
      });
    });
  }

  function request(panel, data) {
    var holder = own(panel, '.awf-branch-request')[0];
    var input = holder && holder.querySelector('input');
    if (!input) { return; }
    data.n = Date.now();  // the same button twice is two requests
    input.value = JSON.stringify(data);
    input.dispatchEvent(new Event('input', { bubbles: true }));
    input.dispatchEvent(new Event('change', { bubbles: true }));
  }

  document.addEventListener('click', function (e) {
    var b = e.target && e.target.closest && e.target.closest('button.awf-branch');
    if (!b) { return; }
    e.preventDefault();
    e.stopPropagation();  // a step's title would fold the step too
    var panel = b.closest('.awf-panel');
    var step = b.closest('.awf-step');
    if (!panel || !step) { return; }
    var section = own(panel, '.awf-step').indexOf(step);
    var message = null;
    var bubble = b.closest(BUBBLES);
    if (bubble) {
      message = Array.from(step.querySelectorAll(BUBBLES)).filter(function (el) {
        return el.closest('.awf-step') === step && !el.closest('.awf-earlier');
      }).indexOf(bubble);
    }
    request(panel, { section: section, message: message });
  }, true);

  var pending = false;
  function look() {
    if (pending) { return; }
    pending = true;
    requestAnimationFrame(function () {
      pending = false;
      document.querySelectorAll('.awf-branch-request').forEach(function (holder) {
        var panel = holder.closest('.awf-panel');
        if (panel) { decorate(panel); }
      });
    });
  }
  new MutationObserver(function (changes) {
    for (var i = 0; i < changes.length; i++) {
      if (changes[i].addedNodes.length) { look(); return; }
    }
  }).observe(document.body, { subtree: true, childList: true });
  look();
})();
