"""Lay out already built functions as `sam build` would, without building them again.

`sam build` runs `cargo lambda build` for each function of infra/template.yaml, copies the binary
named by its `BuildProperties.Binary` to `BUILD_DIR/<LogicalId>/bootstrap`, and writes the
template with each `CodeUri` pointing there. This does the same with binaries that are already
built (BINARY with `{binary}` replaced by each function's Binary), through SAM's own template code (the same update_template and
move_template that `sam build` calls), so `sam local` runs on the layout `sam build` makes.
tests/sam_build.sh checks that the template and layout made here are the ones `sam build` makes.

Usage: python infra/local/stage.py TEMPLATE BINARY BUILD_DIR   (in .venv-sam)
  e.g. BINARY = target/debug/{binary} (cargo's layout) or target/lambda/{binary}/bootstrap
  (cargo lambda's)
"""

import os
import shutil
import stat
import sys

from samcli.commands._utils.template import move_template
from samcli.lib.build.app_builder import ApplicationBuilder
from samcli.lib.providers.provider import get_full_path
from samcli.lib.providers.sam_stack_provider import SamLocalStackProvider

FUNCTION = "AWS::Serverless::Function"


def stage(template, binary_pattern, build_dir):
    stacks, remote = SamLocalStackProvider.get_stacks(template)
    if remote or len(stacks) != 1:
        sys.exit(f"stage.py: expected one local stack in {template}")
    (stack,) = stacks
    artifacts = {}
    for logical_id, resource in stack.template_dict.get("Resources", {}).items():
        if resource.get("Type") != FUNCTION:
            continue
        metadata = resource.get("Metadata", {})
        if metadata.get("BuildMethod") != "rust-cargolambda":
            # Anything else would need its own builder: refuse rather than stage it wrongly.
            sys.exit(f"stage.py: {logical_id} is not built with rust-cargolambda")
        binary = binary_pattern.replace("{binary}", metadata["BuildProperties"]["Binary"])
        out = os.path.join(build_dir, logical_id)
        os.makedirs(out, exist_ok=True)
        shutil.copyfile(binary, os.path.join(out, "bootstrap"))
        os.chmod(os.path.join(out, "bootstrap"), stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
        artifacts[get_full_path(stack.stack_path, logical_id)] = out
    if not artifacts:
        sys.exit(f"stage.py: no functions in {template}")
    output = stack.get_output_template_path(build_dir)
    updated = ApplicationBuilder.update_template(stack, artifacts, {stack.stack_path: output})
    move_template(stack.location, output, updated)
    print(f"staged {len(artifacts)} functions ({binary_pattern}) in {build_dir}")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    stage(*sys.argv[1:])
