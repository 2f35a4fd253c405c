"""deploy/: the node script run for real (scheduler + worker + scan), SLURM templates rendered and checked,
Kubernetes manifests validated offline (core objects with kubernetes-validate, the Dask operator's custom
resources against its CRD schemas, strictly), and the container image definition checked statically."""
from __future__ import annotations

import copy
import functools
import gzip
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pipeline.genome import ingest
from pipeline.scan import read_hits
from tests.conftest import DATA, ROOT
from tests.test_scan_pipeline import table_rows

DEPLOY = ROOT / "deploy"
MOTIFS = str(DATA / "jaspar2024_subset.jaspar")
IMAGE = "motifgrid:0.1.0-cuda12"


# ------------------------------------------------------------------------------------------ node
@pytest.fixture(scope="module")
def store(tmp_path_factory, chrx_slice):
    d = tmp_path_factory.mktemp("deploy-genome")
    fa = d / "g.fa.gz"
    with gzip.open(fa, "wt") as f:
        f.write(">chrD\n" + "\n".join(chrx_slice[i:i + 60] for i in range(0, 50_000, 60)) + "\n")
        f.write(">chrE\n" + "\n".join(chrx_slice[i:i + 60] for i in range(60_000, 71_000, 60)) + "\n")
    return ingest(fa, d / "g.zarr", block_size=8_000, halo=40)


def test_node_script_runs_a_scan(store, tmp_path):
    """deploy/node/run-node.sh: a real `dask scheduler` (scheduler file) and `dask worker` (CPU here, `dask cuda
    worker` on a GPU node), `motifgrid scan --scheduler-file`; the dataset equals a local run's; all stopped."""
    from pipeline.cli import main
    from tests.conftest import subprocess_env

    env = subprocess_env(PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}",
                         MOTIFGRID_RUN_DIR=str(tmp_path / "run"), DASK_WORKER="dask worker", WORKER_THREADS="2",
                         DASHBOARD="127.0.0.1:0", MOTIFGRID=f"{sys.executable} -m pipeline.cli")
    r = subprocess.run(["bash", str(DEPLOY / "node" / "run-node.sh"), store.path, MOTIFS, str(tmp_path / "hits"),
                        "--pvalue", "1e-3", "--no-progress"], env=env, capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stderr + (tmp_path / "run" / "workers.log").read_text()
    assert "1 CPU worker(s)" in r.stderr
    log = (tmp_path / "run" / "scheduler.log").read_text()
    address = re.search(r"Scheduler at:\s+(\S+)", log).group(1)
    assert address.startswith("tcp://127.0.0.1:")                    # loopback only
    assert not (tmp_path / "run" / "scheduler.json").exists()         # removed by the scheduler on exit
    assert main(["scan", store.path, MOTIFS, "--pvalue", "1e-3", "--out", str(tmp_path / "ref"), "--no-progress"]) == 0
    got, want = table_rows(read_hits(str(tmp_path / "hits"))), table_rows(read_hits(str(tmp_path / "ref")))
    assert len(want) > 100 and got == want
    host, port = address[len("tcp://"):].rsplit(":", 1)
    with socket.socket() as s:                                        # the scheduler is gone with the script
        assert s.connect_ex((host, int(port))) != 0


# ------------------------------------------------------------------------------------------ SLURM
def test_sbatch_template():
    script = DEPLOY / "slurm" / "scan.sbatch"
    subprocess.run(["bash", "-n", str(script)], check=True)
    text = script.read_text().replace("\\\n", " ")         # continuation lines joined
    directives = dict(re.findall(r"^#SBATCH --([\w-]+)=(\S+)", text, re.M))
    assert directives["gres"].startswith("gpu:") and directives["ntasks-per-node"] == "1"
    assert re.search(r"^dask scheduler .*--scheduler-file \"\$sched_file\"", text, re.M)
    assert re.search(r"^srun .* dask cuda worker --scheduler-file \"\$sched_file\"", text, re.M)
    assert re.search(r"^motifgrid scan .*--scheduler-file \"\$sched_file\"", text, re.M)
    r = subprocess.run(["bash", str(script)], capture_output=True, text=True)
    assert r.returncode == 2 and "usage:" in r.stderr


def test_jobqueue_slurm_job_script(tmp_path, monkeypatch):
    """SLURMCluster(...).job_script() rendered offline from deploy/slurm/jobqueue.yaml: GPU directives and a
    `dask cuda worker` (python -m dask_cuda.cli) per job."""
    pytest.importorskip("dask_jobqueue")
    monkeypatch.chdir(tmp_path)                    # the job's log directory is made relative to here
    monkeypatch.syspath_prepend(str(DEPLOY / "slurm"))
    import jobqueue_scan

    cfg = yaml.safe_load((DEPLOY / "slurm" / "jobqueue.yaml").read_text())["jobqueue"]["slurm"]
    with jobqueue_scan.make_cluster(scheduler_options={"host": "127.0.0.1", "dashboard_address": "127.0.0.1:0"}) \
            as cluster:
        script = cluster.job_script()
    lines = script.splitlines()
    assert lines[0] == "#!/usr/bin/env bash"
    sbatch = [ln for ln in lines if ln.startswith("#SBATCH")]
    for d in cfg["job-extra-directives"]:
        assert f"#SBATCH {d}" in sbatch
    assert "#SBATCH --gres=gpu:4" in sbatch
    assert f"#SBATCH -p {cfg['queue']}" in sbatch and f"#SBATCH -t {cfg['walltime']}" in sbatch
    assert f"#SBATCH --cpus-per-task={cfg['job-cpu']}" in sbatch and f"#SBATCH --mem={cfg['job-mem']}" in sbatch
    assert f"#SBATCH -J {cfg['name']}" in sbatch
    worker = next(ln for ln in lines if " -m dask_cuda.cli " in ln)
    assert re.search(r" -m dask_cuda\.cli tcp://127\.0\.0\.1:\d+ ", worker)
    assert "--nthreads 4" in worker and "--dashboard-address 127.0.0.1:0" in worker
    assert "--nworkers" not in worker                # dask-cuda makes one worker per GPU itself
    assert (tmp_path / cfg["log-directory"]).is_dir()

    # --tls: a certificate for the run (files, mode 600), the workers started with it, a tls:// scheduler
    pytest.importorskip("cryptography")
    from distributed.security import Security

    pem = jobqueue_scan.write_pems(Security.temporary(), tmp_path)
    assert oct(os.stat(pem["key"]).st_mode & 0o777) == "0o600"
    sec = jobqueue_scan.security_from(pem)
    with jobqueue_scan.make_cluster(security=sec, protocol="tls://",
                                    scheduler_options={"host": "127.0.0.1", "dashboard_address": "127.0.0.1:0"}) \
            as cluster:
        worker = cluster.job_script().splitlines()[-1]
    assert re.search(r" -m dask_cuda\.cli tls://127\.0\.0\.1:\d+ ", worker)
    assert f"--tls-ca-file {pem['ca']} --tls-cert {pem['cert']} --tls-key {pem['key']}" in worker


# ------------------------------------------------------------------------------------------ Kubernetes
@functools.lru_cache
def _crd(name: str) -> dict:
    return yaml.load((DEPLOY / "k8s" / "crds" / name).read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def _crd_schema(name: str) -> dict:
    crd = _crd(name)
    assert crd["kind"] == "CustomResourceDefinition" and crd["spec"]["group"] == "kubernetes.dask.org"
    version = next(v for v in crd["spec"]["versions"] if v["storage"])
    schema = copy.deepcopy(version["schema"]["openAPIV3Schema"])
    schema.setdefault("properties", {}).update({
        "apiVersion": {"type": "string", "enum": [f"{crd['spec']['group']}/{version['name']}"]},
        "kind": {"type": "string", "enum": [crd["spec"]["names"]["kind"]]},
        "metadata": {"type": "object"}})
    schema["required"] = sorted(set(schema.get("required", [])) | {"apiVersion", "kind", "metadata", "spec"})
    return _strict(schema)


def _strict(s):
    """What `kubectl apply --validate=strict` does with a structural schema: unknown fields are errors
    (objects with `properties` and neither `additionalProperties` nor x-kubernetes-preserve-unknown-fields)."""
    if isinstance(s, dict):
        s = {k: _strict(v) for k, v in s.items()}
        if "properties" in s and "additionalProperties" not in s and not s.get("x-kubernetes-preserve-unknown-fields"):
            s["additionalProperties"] = False
    elif isinstance(s, list):
        s = [_strict(v) for v in s]
    return s


def _validate_cr(doc: dict, crd: str) -> None:
    import jsonschema

    jsonschema.validate(doc, _crd_schema(crd), cls=jsonschema.Draft7Validator)


def _pod_specs(doc: dict):
    """(where, PodSpec) of every pod template in a DaskCluster or DaskJob."""
    if doc["kind"] == "DaskJob":
        yield "job", doc["spec"]["job"]["spec"]
        cluster = doc["spec"]["cluster"]["spec"]
    else:
        cluster = doc["spec"]
    yield "scheduler", cluster["scheduler"]["spec"]
    yield "worker", cluster["worker"]["spec"]


def _validate_core(doc: dict) -> None:
    """Pod templates as Pods, the scheduler service as a Service, against the Kubernetes schemas (strict)."""
    import kubernetes_validate

    version = kubernetes_validate.latest_version()
    for where, spec in _pod_specs(doc):
        kubernetes_validate.validate({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"x-{where}"},
                                      "spec": spec}, version, strict=True)
    cluster = doc["spec"]["cluster"]["spec"] if doc["kind"] == "DaskJob" else doc["spec"]
    kubernetes_validate.validate({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "x"},
                                  "spec": cluster["scheduler"]["service"]}, version, strict=True)


MANIFESTS = {"daskcluster.yaml": "daskcluster.yaml", "daskjob.yaml": "daskjob.yaml"}


@pytest.mark.parametrize("name", sorted(MANIFESTS))
def test_k8s_manifest_valid(name):
    pytest.importorskip("kubernetes_validate")
    doc = yaml.safe_load((DEPLOY / "k8s" / name).read_text())
    _validate_cr(doc, MANIFESTS[name])
    _validate_core(doc)
    specs = dict(_pod_specs(doc))
    for where, spec in specs.items():
        for c in spec["containers"]:
            assert c["image"] == IMAGE, (where, c["image"])
    worker = specs["worker"]["containers"][0]
    assert worker["args"][:3] == ["dask", "cuda", "worker"]
    assert int(worker["resources"]["limits"]["nvidia.com/gpu"]) >= 1
    assert specs["scheduler"]["containers"][0]["args"][:2] == ["dask", "scheduler"]
    if doc["kind"] == "DaskJob":
        job = specs["job"]["containers"][0]["args"]
        assert job[:2] == ["motifgrid", "scan"] and "$(DASK_SCHEDULER_ADDRESS)" in job
        # the scan's arguments parse with the real CLI parser
        from pipeline.cli import build_parser

        a = build_parser().parse_args(job[1:])
        assert a.scheduler == "$(DASK_SCHEDULER_ADDRESS)" and a.out == "/data/hits"


def test_k8s_pvc_valid():
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    doc = yaml.safe_load((DEPLOY / "k8s" / "pvc.yaml").read_text())
    kubernetes_validate.validate(doc, kubernetes_validate.latest_version(), strict=True)
    for name in MANIFESTS:
        text = (DEPLOY / "k8s" / name).read_text()
        assert f"claimName: {doc['metadata']['name']}" in text


def _set(doc, path, value):
    d = doc
    for k in path[:-1]:
        d = d[k]
    d[path[-1]] = value


@pytest.mark.parametrize("path,value,check", [
    (("spec", "worker", "replica"), 4, "cr"),                                        # misspelt field
    (("spec", "worker", "replicas"), "four", "cr"),                                  # wrong type
    (("spec", "scheduler", "spec", "containers", 0, "imagePullPolcy"), "Always", "cr"),
    (("spec", "worker", "spec", "containers", 0, "resources", "limit"), {"nvidia.com/gpu": 1}, "cr"),
    (("spec", "scheduler", "sevice"), {}, "cr"),
    (("kind",), "DaskClusters", "cr"),
    (("spec", "worker", "spec", "containers", 0, "resources", "claims"), [{"nme": "x"}], "core"),
    (("spec", "worker", "spec", "containers", 0, "ports", 0, "containerPort"), "http", "core"),
    (("spec", "scheduler", "service", "type"), 3, "core"),
])
def test_k8s_wrong_field_fails(path, value, check):
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    import jsonschema
    doc = yaml.safe_load((DEPLOY / "k8s" / "daskcluster.yaml").read_text())
    _set(doc, path, value)
    with pytest.raises((jsonschema.ValidationError, kubernetes_validate.ValidationError)):
        (_validate_cr if check == "cr" else lambda d, _: _validate_core(d))(doc, "daskcluster.yaml")


def test_crds_vendored_with_licence():
    d = DEPLOY / "k8s" / "crds"
    assert "BSD 3-Clause License" in (d / "LICENSE.dask-kubernetes").read_text()
    assert "dask-kubernetes" in (d / "README.md").read_text()
    for name in MANIFESTS.values():
        assert _crd(name)["kind"] == "CustomResourceDefinition"


# ------------------------------------------------------------------------------------------ container
def test_dockerfile_static():
    text = (DEPLOY / "container" / "Dockerfile").read_text()
    base = re.search(r"^FROM\s+(\S+)", text, re.M).group(1)
    assert base.startswith("nvidia/cuda:12.") and "-runtime-" in base
    assert "python3.12" in text and re.search(r'pip install "\.\[gpu\]"', text)
    assert re.search(r"^USER\s+(?!root)\w+", text, re.M)                            # not root at run time
    for src in re.findall(r"^COPY\s+(.+?)\s+\S+$", text, re.M):
        for p in src.split():
            assert (ROOT / p).exists(), f"COPY source {p} missing"
    assert f"-t {IMAGE} " in text
    extras = __import__("tomllib").loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert "gpu" in extras and any(d.startswith("dask-cuda") for d in extras["gpu"])
