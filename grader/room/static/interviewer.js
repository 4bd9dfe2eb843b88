// The interviewer's page: the candidate's code live, every run with its checks and diagnoses,
// the sheet (checkpoints, hints to send, observed criteria, notes, follow-ups), the level as
// it stands, the end and the reports. Candidate strings only ever go in as text.
"use strict";
const views = new Map();  // "exercise/name" -> read-only editor
const noteSaves = saver((exercise, text) => api("PUT", "notes", {exercise, text}));
let built = false;

function build(state) {
  const main = document.getElementById("exercises");
  for (const ex of state.exercises) {
    const code = el("div", {class: "code"});
    for (const file of ex.files) {
      const pane = el("div", {class: "pane"});
      code.append(el("h3", {}, file.name), pane);
      views.set(`${ex.id}/${file.name}`, KvEditor.create(pane, file.text, {readOnly: true}));
    }
    const notes = el("textarea", {class: "notes", rows: 4, placeholder: "Notes (saved as you type)",
                                  oninput: () => noteSaves.save(ex.id, notes.value)});
    main.append(el("section", {class: "exercise", id: `ex-${ex.id}`},
      el("h2", {}, `${ex.id}: ${ex.title} `, el("span", {class: "level"})),
      el("div", {class: "columns"},
        el("div", {class: "work"}, code, el("h3", {}, "Runs (kept by the server)"),
           el("ol", {class: "runs", reversed: true})),
        el("aside", {class: "sheet"}, sheet(ex), el("h3", {}, "Notes"), notes))));
  }
  built = true;
}

function sheet(ex) {
  const s = ex.sheet;
  return el("div", {},
    el("p", {}, `Time box: ${s.sizing}.`),
    el("ul", {class: "checkpoints"}, s.checkpoints.map((c) => el("li", {}, `by ${c.minutes} min: ${c.expect}`))),
    el("h3", {}, "Hints"),
    el("ol", {class: "hint-list"}, s.hints.map((h) => el("li", {},
      `${h.text} `, el("em", {}, `(${h.caps === "strong_hire" ? "free" : "caps at " + h.caps.replace("_", " ")}) `),
      el("button", {type: "button", class: "send-hint", "data-number": h.number, textContent: "send hint",
                    onclick: () => act("POST", "hints", {exercise: ex.id, number: h.number}, "hint sent")})))),
    el("h3", {}, "Observed criteria"),
    el("ul", {class: "observed"}, s.observed.map((c) => el("li", {"data-criterion": c.id},
      box(ex.id, c.id, "met", true), box(ex.id, c.id, "missed", false),
      ` ${c.id} (${c.level.replace("_", " ")}): ${c.text}`))),
    el("h3", {}, "Follow-up questions"),
    el("ol", {}, s.follow_ups.map((f) => el("li", {}, f.ask,
                                              el("div", {class: "listen"}, `listen for: ${f.listen_for}`)))),
    el("h3", {}, "Named mistakes"),
    el("ul", {}, s.mistakes.map((m) => el("li", {}, el("code", {}, m.id), ` ${m.explain}`))));
}

// A checkbox for met (true) or missed (false); both clear: not recorded yet.
function box(exercise, criterion, label, value) {
  const input = el("input", {type: "checkbox", class: label,
                             onchange: (e) => observe(exercise, criterion, e.target, value)});
  return el("label", {}, input, ` ${label}`);
}

function observe(exercise, criterion, input, value) {
  act("PUT", "observed", {exercise, criterion, value: input.checked ? value : null}, "recorded");
}

async function act(method, path, body, done) {
  try { await api(method, path, body); say(done); } catch (err) { say(err.message, true); }
}

function render(state) {
  if (!built) build(state);
  setClock(state);
  const overall = levelText(state.overall, state.overall_provisional);
  document.getElementById("overall").textContent = `level as it stands: ${overall}`;
  document.getElementById("end").disabled = state.ended;
  document.getElementById("ended").hidden = !state.ended;
  document.getElementById("final").textContent = !state.final ? "" :
    state.final.status === "running" ? "Grading the final code..." :
    state.final.status === "done" ? "Final grading done." : `Final grading: ${state.final.error}`;
  document.getElementById("reports").replaceChildren(...state.reports.map((name) =>
    el("a", {class: "report-link", href: `/api/interviewer/reports/${name}?token=${encodeURIComponent(TOKEN)}`,
             target: "_blank", rel: "noreferrer", textContent: name})));
  for (const ex of state.exercises) {
    const section = document.getElementById(`ex-${ex.id}`);
    for (const file of ex.files) views.get(`${ex.id}/${file.name}`).set(file.text);
    // the rubric's reason opens with the level
    section.querySelector("h2 .level").textContent = ex.reason || levelText(ex.level, ex.provisional);
    for (const button of section.querySelectorAll(".send-hint")) {
      const sent = ex.hints_sent.includes(Number(button.dataset.number));
      button.textContent = sent ? "sent" : "send hint";
      button.disabled = sent || state.ended;
    }
    for (const item of section.querySelectorAll(".observed li")) {
      const value = ex.observed[item.dataset.criterion];
      item.querySelector(".met").checked = value === true;
      item.querySelector(".missed").checked = value === false;
    }
    const notes = section.querySelector(".notes");
    if (!noteSaves.pending(ex.id) && document.activeElement !== notes) notes.value = ex.notes;
    section.querySelector(".runs").replaceChildren(...ex.runs.slice().reverse().map(runItem));
  }
}

function levelText(level, provisional) {
  return `${level ? level.replace("_", " ") : "no level"}${provisional ? " (provisional)" : ""}`;
}

function runItem(run) {
  const item = el("li", {class: `run ${run.status}`, "data-kind": run.kind, "data-status": run.status},
                  el("strong", {}, `${run.kind === "own" ? "own tests" : run.kind} at ${clockTime(run.at)}`),
                  run.seed !== null ? ` (seed ${run.seed})` : "");
  if (run.status === "running") return item.append(" running..."), item;
  if (run.status !== "done") return item.append(` ${run.error || run.status}`), item;
  if (run.kind === "public" || run.kind === "own") {
    const tests = Object.entries(run.tests || {});
    const what = run.kind === "public" ? "public tests" : "of the candidate's own tests (their code reports these)";
    item.append(` ${tests.filter(([, o]) => o === "passed").length} of ${tests.length} ${what} passed`,
                el("pre", {class: "output", textContent: run.output}));
    return item;
  }
  for (const e of run.exercises) {
    item.append(el("div", {}, `${e.id}: ${e.passed} of ${e.total} checks, ${levelText(e.level, e.provisional)}`,
                   e.error ? ` (${e.error})` : ""));
    item.append(el("ul", {class: "diagnoses"}, e.diagnoses.map((d) =>
      el("li", {}, el("code", {}, d.id), ` ${d.message}`))));
    item.append(el("ul", {class: "checks"}, e.checks.map((c) => el("li", {class: c.passed ? "pass" : "fail"},
      c.passed ? "✓ " : "✗ ", el("code", {}, c.id), ` ${c.description}`,
      c.message ? el("div", {class: "message", textContent: c.message}) : null))));
  }
  return item;
}

document.getElementById("end").onclick = () => {
  if (confirm("End the interview? The candidate's page freezes and the final reports are written.")) {
    act("POST", "end", {}, "ending: grading the final code...");
  }
};
follow(render)();
