"""Run the SAM transform itself on a template, as CloudFormation does on deploy: cfn-lint's
checks miss what the transform rejects. Needs no AWS credentials (only a region name).

Usage: python tests/infra/sam_transform.py infra/template.yaml
"""

import os
import sys

from samtranslator.public.exceptions import InvalidDocumentException
from samtranslator.translator.transform import transform
from samtranslator.yaml_helper import yaml_parse


class NoManagedPolicies:
    """The template names no managed policy by name, so nothing needs looking up in IAM."""

    def load(self):
        return {}


def main(path):
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    with open(path) as f:
        template = yaml_parse(f.read())
    # `sam build` and `sam package` replace local CodeUris with S3 ones before the transform runs.
    for resource in template["Resources"].values():
        if resource["Type"] == "AWS::Serverless::Function":
            resource["Properties"]["CodeUri"] = "s3://bucket/code.zip"
    try:
        out = transform(template, {}, NoManagedPolicies())
    except InvalidDocumentException as e:
        for cause in e.causes:
            print(f"{path}: {cause.message}", file=sys.stderr)
        return 1
    print(f"{path}: the SAM transform gives {len(out['Resources'])} resources")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
