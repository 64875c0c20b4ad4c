"""The notebook frontend: `%%awf` / `%awf` magics, the live run panel, the widget reader.

Loaded by `%load_ext awf_nb` (`awf_nb.load_ipython_extension`); nothing here is imported
by `import awf_nb`, so the core never pulls in IPython or ipywidgets.

- `magic.py`: the magics, their flags, the run modes, `RunHandle`, `AwfCellError`;
- `panel.py`: the ipywidgets panel that draws a run from its events;
- `reader.py`: the `InputReader` fed by the panel's Send / End conversation buttons;
- `summary.py`: the end-of-run summary as HTML and text.
"""
