"""The owner's side: `dfsu forget` (``forget``), the owner's stages of one recipe that
`dfsu run` shares (``stages``), the checks of the owner's inputs (``checks``), the summary and
the words of its figures (``report``) and its page (``page``). It imports nothing of the
simulation; the boundary every data-free stage runs behind is ``dfsu.boundary``."""
