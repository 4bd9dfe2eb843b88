// The code editor of kvgrade serve's pages: CodeMirror 6 with Python highlighting and
// indentation, exposed as window.KvEditor for grader/room/static/room.js.
import {basicSetup, EditorView} from "codemirror";
import {python} from "@codemirror/lang-python";
import {indentUnit} from "@codemirror/language";
import {Compartment, EditorState, Transaction} from "@codemirror/state";
import {keymap} from "@codemirror/view";
import {indentWithTab} from "@codemirror/commands";

function create(parent, doc, {readOnly = false, onChange = null} = {}) {
  const editable = new Compartment();
  const lock = (ro) => [EditorState.readOnly.of(ro), EditorView.editable.of(!ro)];
  const extensions = [basicSetup, python(), indentUnit.of("    "), keymap.of([indentWithTab]),
                      editable.of(lock(readOnly))];
  if (onChange) {  // edits made here, not text set from the server
    extensions.push(EditorView.updateListener.of((u) => {
      if (u.docChanged && !u.transactions.some((t) => t.annotation(Transaction.remote))) {
        onChange(u.state.doc.toString());
      }
    }));
  }
  const view = new EditorView({doc, extensions, parent});
  return {
    view,
    get: () => view.state.doc.toString(),
    set(text) {
      if (text !== view.state.doc.toString()) {
        view.dispatch({changes: {from: 0, to: view.state.doc.length, insert: text},
                       annotations: Transaction.remote.of(true)});
      }
    },
    setReadOnly: (ro) => view.dispatch({effects: editable.reconfigure(lock(ro))}),
  };
}

window.KvEditor = {create};
