// The admin's live presence dashboard: re-renders its body every few seconds (server-rendered,
// the same template as the first page), pausing while the tab is hidden.
(function () {
  "use strict";
  var box = document.getElementById("presence-dashboard");
  if (!box || !window.fetch) return;
  var every = parseInt(box.getAttribute("data-refresh-ms"), 10) || 5000;
  var busy = false;

  function refresh() {
    if (busy || document.hidden) return;
    busy = true;
    var url = new URL(window.location.href);
    url.searchParams.set("partial", "1");
    fetch(url.toString(), {credentials: "same-origin", headers: {"X-Requested-With": "fetch"}})
      // A redirect is the login page (session over): keep the last view rather than show it.
      .then(function (response) { return response.ok && !response.redirected ? response.text() : null; })
      .then(function (html) { if (html !== null) box.innerHTML = html; })
      .catch(function () { /* keep the last good view; try again next time */ })
      .then(function () { busy = false; });
  }

  window.setInterval(refresh, every);
  document.addEventListener("visibilitychange", refresh);
})();
