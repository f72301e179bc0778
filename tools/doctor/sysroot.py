"""Where the node checks read the node: files under a root (/ on a real node,
a fake tree in tests) and the output of commands, run for real under /, read
from ROOT/commands/NAME.txt otherwise (NAME: the command line with its spaces
as _, e.g. commands/fi_info_-l.txt). A recorded output that is absent counts as
a command that is not installed. Where argv[0] is a path, NAME starts with its
last part."""
import os
import shutil
import subprocess

COMMAND_TIMEOUT_S = 20
LAUNCHER_RANKS = ("RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID")


class SysRoot:
    def __init__(self, root="/"):
        self.root = os.path.abspath(root)
        self.real = self.root == "/"

    def path(self, p):
        """The host path of p, an absolute path on the checked node."""
        return p if self.real else os.path.join(self.root, p.lstrip("/"))

    def exists(self, p):
        return os.path.exists(self.path(p))

    def read(self, p, default=None):
        """The file's text, stripped; default when it is absent or unreadable."""
        try:
            with open(self.path(p), errors="replace") as f:
                return f.read().strip()
        except OSError:
            return default

    def read_bytes(self, p):
        try:
            with open(self.path(p), "rb") as f:
                return f.read()
        except OSError:
            return b""

    def listdir(self, p):
        try:
            return sorted(e for e in os.listdir(self.path(p)) if not e.startswith("."))
        except OSError:
            return []

    def realpath(self, p):
        """p with its links resolved, as a path on the checked node."""
        resolved = os.path.realpath(self.path(p))
        if self.real:
            return resolved
        if resolved == self.root:
            return "/"
        if resolved.startswith(self.root + os.sep):
            return resolved[len(self.root):]
        return resolved  # a link that leaves the tree: shown as it is

    def run(self, argv):
        """(found, output) of the command argv: found is False where it is not
        installed (or not recorded); output holds stdout and stderr."""
        if not self.real:
            name = "_".join([os.path.basename(argv[0])] + argv[1:])
            text = self.read("/commands/" + name + ".txt")
            return (text is not None, text or "")
        if shutil.which(argv[0]) is None:
            return (False, "")
        # Without a launcher's rank: hetccl-info would join the job instead.
        env = {k: v for k, v in os.environ.items() if k not in LAUNCHER_RANKS}
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, env=env)
        except (OSError, subprocess.TimeoutExpired) as e:
            return (True, f"{argv[0]}: {e}")
        return (True, done.stdout + done.stderr)
