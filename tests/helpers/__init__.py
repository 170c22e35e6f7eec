"""What the tests share, and the scripts they run in other processes; importable as ``helpers`` (``pythonpath`` in
``setup.cfg``).

* :mod:`.mechanisms`: the mechanisms' list, tiny builds and padded batches; :mod:`.references`: each mechanism's
  O(N^2) reference from its paper; :mod:`.memory`: the largest tensor of a block;
* :mod:`.models`: tiny configs and inputs, source checkpoints saved with Transformers' classes, remote-code loading
  in a fresh process;
* :mod:`.device_lane`: the device lane's (``tests/cuda``) precisions, cases, padding masks and comparisons by
  relative norm;
* :mod:`.docs`: the documentation's python blocks, run as a page prints them;
* :mod:`.conversion`: ``hf-effattn convert`` in-process; :mod:`.finetuning`: tiny checkpoints, datasets and the
  scripts' options; :mod:`.red_team`: the red-team tests' tiny runs and byte-for-byte refusals; :mod:`.threads`:
  torch's thread count restored after a test;
* scripts run in a child process: ``kill_during_convert.py`` and ``kill_during_save.py`` (with :mod:`.forked`: a
  conversion or a run killed at a chosen stage), ``fsdp_tied_weights_script.py`` (under ``accelerate launch``).
"""
