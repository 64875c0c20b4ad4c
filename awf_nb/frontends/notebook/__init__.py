"""The notebook frontend: `%%awf` / `%awf` magics, the live run panel, the widget reader.

Loaded by `%load_ext awf_nb` (`awf_nb.load_ipython_extension`); nothing here is imported
by `import awf_nb`, so the core never pulls in IPython or ipywidgets.

- `magic.py`: the `%%awf` / `%awf` magics (the frontend itself is picked and connected by
  `frontends/connect.py`, as for `awf run` and `awf_nb.run()`);
- `parsers.py`: their command lines, built from the `awf` CLI's commands;
- `run_mode.py`: whether a cell waits for its run (by ipykernel version and input);
- `transformer.py`: rewrites a `%%awf` cell so that it awaits its run;
- `handle.py`: `RunHandle` (a run bound to a Python name) and `AwfCellError`;
- `panel.py`, `panel_items.py`, `panel_controls.py`, `panel_flush.py`: the ipywidgets panel
  that draws a run from its events, its parts, its text box and buttons, its flushing;
- `reader.py`: the `InputReader` fed by the panel's Send / End conversation buttons;
- `diagram.py`: workflow pictures in a cell; `summary.py`: the end-of-run summary as HTML
  and text.
"""
