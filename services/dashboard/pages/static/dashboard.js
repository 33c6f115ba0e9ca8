// Drydock dashboard: follows a thread's conversation live (server-sent events). Everything else
// on the pages works without this script.
(function () {
  "use strict";
  var timeline = document.querySelector("[data-thread-live]");
  if (!timeline || !window.EventSource) { return; }
  var status = document.getElementById("live-status");
  var badge = document.getElementById("thread-state");
  var stop = document.getElementById("stop-form");
  var working = document.getElementById("working");
  var ended = { idle: true, failed: true, stopped: true };
  var source = new EventSource(timeline.getAttribute("data-thread-live"));
  var sectionsUrl = timeline.getAttribute("data-sections");
  var recent = [];
  var places = {
    timeline: "timeline", changes: "changes", files: "changed-files", pulls: "pull-requests-section"
  };

  function showState(state) {
    if (!state || !badge) { return; }
    var element = document.createElement("span");
    element.textContent = state;
    element.className = "state state-" + state;
    badge.replaceChildren(element);
    if (stop) { stop.hidden = !!ended[state]; }
  }

  function showWorking(text) {
    if (!working) { return; }
    working.textContent = text || "";
    working.hidden = !text;
  }

  function runOf(item) {
    var run = timeline.querySelector('[data-run="' + item.run + '"]');
    if (run) { return run; }
    var empty = document.getElementById("timeline-empty");
    if (empty) { empty.remove(); }
    if (item.type === "started") {
      timeline.insertAdjacentHTML("beforeend", item.html);
      run = timeline.lastElementChild;
      var number = run.querySelector(".run-number");
      if (number) { number.textContent = String(timeline.querySelectorAll(".run").length); }
    }
    return run;
  }

  // After a run ends, the server renders the finished parts: usage, the diff, the pull requests.
  function refresh() {
    if (!sectionsUrl || !window.fetch) { return; }
    fetch(sectionsUrl, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (response) { return response.ok ? response.json() : null; })
      .then(function (parts) {
        if (!parts) { return; }
        // The steps were announced as they came: the redrawn timeline must not be read again.
        timeline.setAttribute("aria-live", "off");
        Object.keys(places).forEach(function (name) {
          var element = document.getElementById(places[name]);
          if (element && typeof parts[name] === "string") { element.innerHTML = parts[name]; }
        });
        window.setTimeout(function () { timeline.setAttribute("aria-live", "polite"); }, 1000);
        showState(parts.state);
        // Events that arrived while the server drew the parts are not in them.
        recent.forEach(function (item) { if (item.seq > parts.last_seq) { apply(item); } });
      })
      .catch(function () { /* the live steps stay; a reload shows the rest */ });
  }

  source.onopen = function () { if (status) { status.textContent = "(live)"; } };
  source.onerror = function () { if (status) { status.textContent = "(reconnecting…)"; } };
  source.addEventListener("run", function (message) {
    var item = JSON.parse(message.data);
    recent.push(item);
    if (recent.length > 100) { recent.shift(); }
    apply(item);
    if (item.ended || item.type === "message_posted") { refresh(); }
  });

  function apply(item) {
    if (timeline.querySelector('[data-seq="' + item.seq + '"]')) { return; }
    var run = runOf(item);
    if (item.type !== "started" && item.html && run) {
      var steps = run.querySelector(".steps");
      if (steps) { steps.insertAdjacentHTML("beforeend", item.html); }
    }
    showState(item.state);
    showWorking(item.working);
    (item.files || []).forEach(function (name) {
      var files = document.getElementById("changed-files");
      if (!files) { return; }
      var known = Array.prototype.some.call(files.querySelectorAll("code"), function (code) {
        return code.textContent === name;
      });
      if (!known) {
        var entry = document.createElement("li");
        var code = document.createElement("code");
        code.textContent = name;
        entry.appendChild(code);
        files.appendChild(entry);
      }
    });
    if (item.sandbox) {
      var sandboxStatus = document.getElementById("sandbox-status");
      var sandboxId = document.getElementById("sandbox-id");
      if (sandboxStatus) { sandboxStatus.textContent = "ready"; }
      if (sandboxId) { sandboxId.textContent = item.sandbox; }
    }
  }
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
