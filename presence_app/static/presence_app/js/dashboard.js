// The admin's live presence dashboard: re-renders its body every few seconds (server-rendered,
// the same template as the first page), pausing while the tab is hidden, and shows the 24-hour
// chart's values under the pointer (or the arrow keys, on the focused chart).
(function () {
  "use strict";
  var box = document.getElementById("presence-dashboard");
  if (!box || !window.fetch) return;
  var note = document.getElementById("presence-refresh-note");
  var every = parseInt(box.getAttribute("data-refresh-ms"), 10) || 5000;
  var busy = false;
  var failing = false;
  var hover = null; // the chart's hovered fraction (0..1), kept across refreshes

  // -- refresh ------------------------------------------------------------------------------
  // The new body is merged into the page node by node rather than swapped whole: focus, the
  // hovered chart and a screen reader's place survive, and only changed text changes.
  function morph(from, to) {
    if (from.nodeType !== to.nodeType || from.nodeName !== to.nodeName) {
      from.replaceWith(to);
    } else if (from.nodeType === Node.TEXT_NODE) {
      if (from.nodeValue !== to.nodeValue) from.nodeValue = to.nodeValue;
    } else if (from.nodeType === Node.ELEMENT_NODE && !from.isEqualNode(to)) {
      Array.prototype.slice.call(from.attributes).forEach(function (a) {
        if (!to.hasAttribute(a.name)) from.removeAttribute(a.name);
      });
      Array.prototype.slice.call(to.attributes).forEach(function (a) {
        if (from.getAttribute(a.name) !== a.value) from.setAttribute(a.name, a.value);
      });
      morphChildren(from, to);
    }
  }

  function morphChildren(from, to) {
    var a = Array.prototype.slice.call(from.childNodes);
    var b = Array.prototype.slice.call(to.childNodes);
    if (a.length !== b.length) {
      from.replaceChildren.apply(from, b);
      return;
    }
    a.forEach(function (child, i) { morph(child, b[i]); });
  }

  function setFailing(now, text) {
    if (now === failing) return;
    failing = now;
    if (note) note.textContent = now ? text : ""; // said once, when it changes
  }

  function refresh() {
    if (busy || document.hidden) return;
    busy = true;
    var url = new URL(window.location.href);
    url.searchParams.set("partial", "1");
    fetch(url.toString(), {credentials: "same-origin", headers: {"X-Requested-With": "fetch"}})
      .then(function (response) {
        // A redirect is the login page (session over): keep the last view rather than show it.
        if (response.redirected) throw new Error("Live updates stopped: log in again.");
        if (!response.ok) throw new Error("Live updates paused: the server answered " + response.status + ".");
        return response.text();
      })
      .then(function (html) {
        var fresh = document.createElement("template");
        fresh.innerHTML = html;
        morphChildren(box, fresh.content);
        setFailing(false);
        if (hover !== null) showAt(hover);
      })
      .catch(function (error) {
        var text = error && /^Live updates/.test(error.message) ? error.message
          : "Live updates paused: the server cannot be reached.";
        setFailing(true, text + " The figures below are from the time shown.");
      })
      .then(function () { busy = false; });
  }

  window.setInterval(refresh, every);
  document.addEventListener("visibilitychange", refresh);

  // -- the chart's values -----------------------------------------------------------------------
  function chartData() {
    var el = document.getElementById("presence-chart-data");
    return el ? JSON.parse(el.textContent) : null;
  }

  var formats = {};
  function clock(seconds, tz) {
    if (!formats[tz]) {
      var options = {hour: "2-digit", minute: "2-digit", hourCycle: "h23"};
      try {
        formats[tz] = new Intl.DateTimeFormat(undefined, Object.assign({timeZone: tz}, options));
      } catch (e) { // a zone this browser does not know: its own
        formats[tz] = new Intl.DateTimeFormat(undefined, options);
      }
    }
    return formats[tz].format(new Date(seconds * 1000));
  }

  // The sample nearest to ``fraction`` of the 24 hours, or the minute there without one.
  function sampleAt(data, fraction) {
    var t = data.start + fraction * (data.end - data.start);
    if (data.first !== null) {
      var i = Math.round((t - data.first) / 60);
      if (i >= 0 && i < data.counts.length && data.counts[i] !== null) {
        return {t: data.first + i * 60, count: data.counts[i]};
      }
    }
    return {t: t, count: null};
  }

  function showAt(fraction) {
    var plot = box.querySelector(".presence-chart-plot");
    var data = chartData();
    if (!plot || !data) return;
    var layer = plot.querySelector(".presence-chart-hover");
    var sample = sampleAt(data, Math.min(1, Math.max(0, fraction)));
    var x = (sample.t - data.start) / (data.end - data.start);
    var tip = layer.querySelector(".presence-chart-tip");
    var point = layer.querySelector(".presence-chart-point");
    var top = parseFloat(plot.getAttribute("data-top")) || 1;
    layer.hidden = false;
    layer.querySelector(".presence-chart-rule").style.left = x * 100 + "%";
    tip.textContent = clock(sample.t, data.tz) + " · "
      + (sample.count === null ? "no sample" : sample.count + " online");
    point.hidden = sample.count === null;
    if (sample.count !== null) {
      point.style.left = x * 100 + "%";
      point.style.top = (1 - sample.count / top) * 100 + "%";
    }
    // The tip beside the rule, on whichever side has room.
    var width = plot.clientWidth;
    var left = x * width + 8;
    if (left + tip.offsetWidth > width) left = x * width - 8 - tip.offsetWidth;
    tip.style.left = Math.max(0, left) + "px";
  }

  function hide() {
    hover = null;
    var layer = box.querySelector(".presence-chart-hover");
    if (layer) layer.hidden = true;
  }

  function fractionOf(event, plot) {
    var rect = plot.getBoundingClientRect();
    return (event.clientX - rect.left) / rect.width;
  }

  // Delegated: the plot is replaced with the rest of the body at each refresh.
  box.addEventListener("pointermove", function (event) {
    var plot = event.target.closest && event.target.closest(".presence-chart-plot");
    if (!plot) return;
    hover = fractionOf(event, plot);
    showAt(hover);
  });
  box.addEventListener("pointerleave", function (event) {
    if (event.target.classList && event.target.classList.contains("presence-chart-plot")) hide();
  }, true); // pointerleave does not bubble: caught on its way down
  box.addEventListener("focusout", function (event) {
    if (event.target.classList.contains("presence-chart-plot")) hide();
  });
  box.addEventListener("keydown", function (event) {
    if (!event.target.classList.contains("presence-chart-plot")) return;
    var step = {ArrowLeft: -1, ArrowRight: 1, PageUp: -60, PageDown: 60}[event.key];
    if (!step) return;
    event.preventDefault();
    var data = chartData();
    var span = data.end - data.start;
    if (hover === null) { // the first key shows the latest sample
      var last = data.first === null ? data.end : data.first + (data.counts.length - 1) * 60;
      hover = (last - data.start) / span;
    } else {
      hover = Math.min(1, Math.max(0, hover + step * 60 / span));
    }
    showAt(hover);
  });
})();
