// Starts Swagger UI (npm swagger-ui-dist, served from this origin) on tracecard's /schema page.
// A file rather than an inline script: the viewer's CSP allows scripts from 'self' only.
window.addEventListener("DOMContentLoaded", function () {
  var root = document.getElementById("swagger-ui");
  window.ui = SwaggerUIBundle({
    url: root.dataset.url,
    dom_id: "#swagger-ui",
    deepLinking: true,
    validatorUrl: null, // the default asks an online validator for a badge: no other origin
    presets: [SwaggerUIBundle.presets.apis],
    layout: "BaseLayout",
  });
});
