// tracecard's trace page: a live refresh that keeps your place, span permalinks, j/k between
// spans, copy buttons. Served from this origin under the CSP (no inline script anywhere).
(function () {
  "use strict";

  // --- live refresh: idiomorph keeps what a person opened -----------------------------------
  // The trace body is re-rendered every 2 s while the run is live and morphed into the page
  // (htmx's morph extension). A <details> keeps the open/closed state the person gave it, and
  // a call's detail or payload loaded on demand is kept as loaded (the server sends
  // "loading…" placeholders).
  if (window.Idiomorph) {
    const callbacks = window.Idiomorph.defaults.callbacks;
    callbacks.beforeAttributeUpdated = function (name, node) {
      return !(name === "open" && node.tagName === "DETAILS");
    };
    callbacks.beforeNodeMorphed = function (oldNode) {
      return !(oldNode.nodeType === 1 && oldNode.hasAttribute("data-loaded"));
    };
  }
  document.addEventListener("htmx:afterSwap", function (event) {
    const target = event.detail && event.detail.target;
    // (more waterfall rows are not "loaded content": the live refresh keeps updating them)
    if (target && target.id !== "trace-body" && !target.matches("li") &&
        target.closest && target.closest("#trace-body")) {
      target.setAttribute("data-loaded", "");
    }
  });

  // --- permalinks: #span-… opens, highlights and scrolls to the span ------------------------
  let seeking = null; // a permalinked span not on the page yet: opened once rows bring it
  function openTarget(fetched) {
    const id = decodeURIComponent(location.hash.slice(1));
    if (!id) return;
    const target = document.getElementById(id);
    if (!target) {
      // a span past the rows a long waterfall shows: load the rows through it, then open it
      const more = document.getElementById("more-rows");
      if (more && fetched !== true && id.indexOf("span-") === 0 && window.htmx) {
        seeking = id;
        const url = more.getAttribute("hx-get") + "&until=" + encodeURIComponent(id.slice(5));
        window.htmx.ajax("GET", url, { target: more, swap: "outerHTML" });
      }
      return;
    }
    seeking = null;
    let node = target.tagName === "DETAILS" ? target : target.querySelector(":scope > details");
    if (node && !node.open) node.open = true;
    for (let up = target.parentElement; up; up = up.parentElement) {
      if (up.tagName === "DETAILS" && !up.open) up.open = true;
    }
    target.scrollIntoView({ block: "center" });
    const summary = target.querySelector(":scope > details > summary");
    if (summary) summary.focus({ preventScroll: true });
  }
  window.addEventListener("hashchange", function () { openTarget(false); });
  document.addEventListener("htmx:afterSettle", function () {
    if (seeking && document.getElementById(seeking)) openTarget(true);
  });
  document.addEventListener("DOMContentLoaded", function () { openTarget(false); });
  // a link to the span already in the address bar: clicking it again still opens it
  document.addEventListener("click", function (event) {
    const link = event.target.closest && event.target.closest('a[href^="#"]');
    if (link && link.getAttribute("href") === location.hash) openTarget(false);
  });

  // --- keyboard: j / k between spans, Enter opens (the summary's own behaviour) -------------
  document.addEventListener("keydown", function (event) {
    if (event.altKey || event.ctrlKey || event.metaKey) return;
    if (event.key !== "j" && event.key !== "k") return;
    const field = event.target;
    if (field && (field.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(field.tagName))) {
      return;
    }
    const rows = Array.from(document.querySelectorAll("li.span > details > summary"));
    if (!rows.length) return;
    const at = rows.indexOf(document.activeElement);
    let next = event.key === "j" ? at + 1 : at - 1;
    if (at < 0) next = 0;
    next = Math.max(0, Math.min(rows.length - 1, next));
    rows[next].focus();
    rows[next].scrollIntoView({ block: "nearest" });
    event.preventDefault();
  });

  // --- copy buttons: the text of the element they name --------------------------------------
  document.addEventListener("click", function (event) {
    const button = event.target.closest && event.target.closest("button.copy");
    if (!button) return;
    const source = button.dataset.copy !== undefined
      ? button.dataset.copy
      : (button.parentElement.querySelector("pre, code") || {}).textContent || "";
    const done = function () {
      button.textContent = "copied";
      setTimeout(function () { button.textContent = "copy"; }, 1200);
    };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(source).then(done, function () { button.textContent = "select and copy"; });
    } else {
      button.textContent = "select and copy";
    }
  });
})();
