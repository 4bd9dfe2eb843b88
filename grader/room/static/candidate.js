// The candidate's page: prompts, an editor per file, runs as the chosen feedback shows them,
// hints the interviewer sent. Never told anything else: the server sends nothing else.
"use strict";
const editors = new Map();  // "exercise/name" -> editor
const saves = saver((key, text) => {
  const [exercise, name] = key.split("/");
  return api("PUT", "files", {exercise, name, text});
});
let built = false;
const RUN_TITLES = {public: "Public tests", own: "Your tests", submit: "Submission"};

function build(state) {
  const main = document.getElementById("exercises");
  for (const ex of state.exercises) {
    const tabs = el("div", {class: "tabs"}), holder = el("div", {class: "editor"});
    for (const file of ex.files) {
      const key = `${ex.id}/${file.name}`, pane = el("div", {class: "pane", "data-file": file.name});
      editors.set(key, KvEditor.create(pane, file.text, {onChange: (text) => saves.save(key, text)}));
      holder.append(pane);
      tabs.append(el("button", {type: "button", class: "tab", "data-file": file.name, textContent: file.name,
                                onclick: () => showFile(ex.id, file.name)}));
    }
    for (const file of ex.public_files) {  // the kit's public tests: to read, never edited or saved
      const pane = el("div", {class: "pane readonly", "data-file": file.name});
      KvEditor.create(pane, file.text, {readOnly: true});
      holder.append(pane);
      tabs.append(el("button", {type: "button", class: "tab readonly", "data-file": file.name,
                                textContent: `${file.name} (read-only)`, title: "the kit's public tests",
                                onclick: () => showFile(ex.id, file.name)}));
    }
    const publicNames = ex.public_files.map((f) => f.name).join(", ") || "the kit's public tests";
    const kinds = [
      ["public", "Run public tests", `Runs the kit's public tests (${publicNames}) against your module.`],
      ...(ex.own_tests ? [["own", "Run my tests", `Runs your own tests (${ex.own_tests}) against your module.`]] : []),
      ["submit", "Submit", "Grades your module with the hidden checks"
                           + (ex.own_tests ? `, and your ${ex.own_tests} against known versions.` : ".")]];
    const run = ([kind, label, what]) => el("button", {type: "button", class: `action ${kind}`, "data-kind": kind,
                                                       textContent: label, title: what, onclick: () => start(ex, kind)});
    const says = el("ul", {class: "what-runs"}, kinds.map(([, label, what]) => el("li", {}, el("strong", {}, label),
                                                                                   `: ${what}`)));
    main.append(el("section", {class: "exercise", id: `ex-${ex.id}`},
      el("h2", {}, `${ex.id}: ${ex.title}`),
      el("div", {class: "columns"},
        el("article", {class: "prompt"}, Markdown.render(ex.prompt)),
        el("div", {class: "work"}, tabs, holder, el("div", {class: "actions"}, kinds.map(run)), says,
           el("div", {class: "hints"}), el("ol", {class: "runs", reversed: true})))));
    showFile(ex.id, ex.files[0].name);
  }
  built = true;
}

function showFile(exercise, name) {
  const section = document.getElementById(`ex-${exercise}`);
  for (const node of section.querySelectorAll("[data-file]")) {
    const on = node.dataset.file === name;
    if (node.classList.contains("pane")) node.hidden = !on; else node.classList.toggle("on", on);
  }
}

async function start(ex, kind) {
  await saves.flush();
  const files = Object.fromEntries(ex.files.map((f) => [f.name, editors.get(`${ex.id}/${f.name}`).get()]));
  try {
    await api("POST", "runs", {exercise: ex.id, kind, files});
    say({public: "running the public tests...", own: "running your tests..."}[kind] || "grading...");
  } catch (err) { say(err.message, true); }
}

function render(state) {
  if (!built) build(state);
  const status = document.getElementById("status");
  const running = state.exercises.some((ex) => ex.runs.some((r) => r.status === "running"));
  if (status.textContent.endsWith("...") && !running) {
    say("");  // "grading..." ends with the run
  }
  setClock(state);
  document.getElementById("ended").hidden = !state.ended;
  document.body.classList.toggle("frozen", state.ended);
  for (const ex of state.exercises) {
    const section = document.getElementById(`ex-${ex.id}`);
    for (const file of ex.files) {  // another tab's saved text, unless this tab is typing here
      const editor = editors.get(`${ex.id}/${file.name}`);
      if (state.ended) editor.setReadOnly(true);
      if (!saves.pending(`${ex.id}/${file.name}`) && !editor.view.hasFocus) editor.set(file.text);
    }
    for (const button of section.querySelectorAll("button.action")) button.disabled = state.ended;
    section.querySelector(".hints").replaceChildren(...ex.hints.map((h) =>
      el("p", {class: "hint", "data-number": h.number}, el("strong", {}, `Hint ${h.number}: `), h.text)));
    section.querySelector(".runs").replaceChildren(...ex.runs.slice().reverse().map((r) => runItem(r, state.feedback)));
  }
}

function runItem(run, feedback) {
  const title = `${RUN_TITLES[run.kind] || "Submission"} at ${clockTime(run.at)}`;
  const item = el("li", {class: `run ${run.status}`, "data-kind": run.kind, "data-status": run.status},
                  el("strong", {}, title));
  if (run.status === "running") return item.appendChild(el("span", {}, " running...")), item;
  if (run.status !== "done") return item.append(` ${run.error}`), item;
  if (run.kind === "public" || run.kind === "own") {
    const tests = Object.entries(run.tests || {}), failed = tests.filter(([, o]) => o === "failed").length;
    item.append(` ${tests.length - failed} passed, ${failed} failed`,
                el("pre", {class: "output", textContent: run.output}));
    return item;
  }
  if (run.graded) return item.append(" graded: your interviewer has the result."), item;
  item.append(` ${run.passed} of ${run.total} checks passed`, run.error ? ` (${run.error})` : "");
  item.append(el("ul", {class: "checks"}, run.checks.map((c) =>
    el("li", {class: c.passed ? "pass" : "fail"}, c.passed ? "✓ " : "✗ ", c.description,
       c.message ? el("div", {class: "message", textContent: c.message}) : null))));
  if (run.diagnoses && run.diagnoses.length) {
    item.append(el("ul", {class: "diagnoses"}, run.diagnoses.map((d) => el("li", {}, `${d.id}: ${d.message}`))));
  }
  return item;
}

follow(render)();
