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

// --- The thread list, live (server-sent events): each message is a thread's row as it is now.
(function () {
  "use strict";
  var table = document.querySelector("[data-live-list]");
  if (!table || !window.EventSource) { return; }
  var body = table.tBodies[0];
  var status = document.getElementById("list-status");
  var source = new EventSource(table.getAttribute("data-live-list"));

  function rowOf(html) {
    var holder = document.createElement("tbody");
    holder.innerHTML = html.trim();
    return holder.firstElementChild;
  }

  source.onopen = function () { if (status) { status.textContent = "This list updates live."; } };
  source.onerror = function () { if (status) { status.textContent = "Reconnecting…"; } };
  source.addEventListener("thread", function (message) {
    var item = JSON.parse(message.data);
    var row = rowOf(item.html);
    if (!row) { return; }
    var current = Array.prototype.find.call(body.rows, function (candidate) {
      return candidate.getAttribute("data-thread") === item.id;
    });
    if (current) {
      current.replaceWith(row);
    } else if (item.new) {
      body.insertBefore(row, body.firstElementChild);
      var none = document.getElementById("no-threads");
      if (none) { none.remove(); }
    }
  });
})();
