// Drydock dashboard: follows a thread's run live (server-sent events). Everything else on
// the pages works without this script.
(function () {
  "use strict";
  var list = document.querySelector("[data-live]");
  if (!list || !window.EventSource) { return; }
  var status = document.getElementById("live-status");
  var badge = document.getElementById("thread-state");
  var stop = document.getElementById("stop-form");
  var files = document.getElementById("changed-files");
  var pulls = document.getElementById("pull-requests");
  var ended = { idle: true, failed: true, stopped: true };
  var source = new EventSource(list.getAttribute("data-live"));

  function text(tag, value) {
    var element = document.createElement(tag);
    element.textContent = value;
    return element;
  }

  source.onopen = function () { if (status) { status.textContent = "(live)"; } };
  source.onerror = function () { if (status) { status.textContent = "(reconnecting…)"; } };
  source.addEventListener("run", function (message) {
    var item = JSON.parse(message.data);
    if (list.querySelector('[data-seq="' + item.seq + '"]')) { return; }
    list.insertAdjacentHTML("beforeend", item.html);
    if (item.state && badge) {
      var state = text("span", item.state);
      state.className = "state state-" + item.state;
      badge.replaceChildren(state);
      if (stop) { stop.hidden = !!ended[item.state]; }
    }
    (item.files || []).forEach(function (name) {
      if (!files) { return; }
      var known = Array.prototype.some.call(files.querySelectorAll("code"), function (code) {
        return code.textContent === name;
      });
      if (!known) {
        var entry = document.createElement("li");
        entry.appendChild(text("code", name));
        files.appendChild(entry);
      }
    });
    if (item.sandbox) {
      var sandboxStatus = document.getElementById("sandbox-status");
      var sandboxId = document.getElementById("sandbox-id");
      if (sandboxStatus) { sandboxStatus.textContent = "ready"; }
      if (sandboxId) { sandboxId.textContent = item.sandbox; }
    }
    if (item.pull_request && pulls) {
      var link = text("a", item.pull_request);
      link.href = item.pull_request;
      var row = document.createElement("li");
      row.appendChild(link);
      pulls.appendChild(row);
      var none = document.getElementById("no-pull-requests");
      if (none) { none.remove(); }
    }
  });
})();
