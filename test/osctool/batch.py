# Runs `openstack …` commands read from stdin, one JSON list of arguments a
# line, in this one interpreter: each is openstackclient.shell.main(argv),
# the function the `openstack` script calls, with stdout and stderr
# captured together. One JSON object a line answers each: {"code": exit
# status, "out": what it printed}. Importing the client costs over a second
# of CPU; paying it once per test instead of once per command is the point.
import io
import json
import logging
import sys
import traceback

# Usage lines and errors name the command an operator types (cliff reads
# it at import).
sys.argv = ["/usr/bin/openstack"]
from openstackclient.shell import main  # noqa: E402

answers = sys.stdout
for line in sys.stdin:
    argv = json.loads(line)
    buf = io.StringIO()
    sys.stdout = sys.stderr = buf
    # Each run adds its console handler to the root logger: drop the last
    # command's, which writes into its buffer.
    logging.getLogger().handlers.clear()
    try:
        code = main(argv)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if isinstance(e.code, str):
            buf.write(e.code + "\n")
    except BaseException:
        code = 1
        buf.write(traceback.format_exc())
    finally:
        sys.stdout, sys.stderr = answers, sys.__stderr__
    answers.write(json.dumps({"code": code or 0, "out": buf.getvalue()}) + "\n")
    answers.flush()
