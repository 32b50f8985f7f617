"""The web dashboard: a static page and its assets (shipped in the package), and the GPU readings of a job."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, HTTPException
from fastapi.responses import FileResponse

from corral.api.usage import JobGpusOut
from corral.head.routers.deps import Runtime, User
from corral.head.services.gpu_series import job_gpus

ASSETS = Path(__file__).resolve().parent.parent / "dashboard"
SERVED = {"app.js": "text/javascript", "style.css": "text/css", "favicon.svg": "image/svg+xml"}
NO_CACHE = {"Cache-Control": "no-cache"}  # revalidate, so an upgraded head serves its own page

router = APIRouter()


@router.get("/", include_in_schema=False)
def index() -> FileResponse:
    """The dashboard. It holds no data: its script reads the API with the token the browser keeps."""
    return FileResponse(ASSETS / "index.html", media_type="text/html", headers=NO_CACHE)


@router.get("/ui/{name}", include_in_schema=False)
def asset(name: str) -> FileResponse:
    if name not in SERVED:
        raise HTTPException(404, f"no dashboard asset {name!r}")
    return FileResponse(ASSETS / name, media_type=SERVED[name], headers=NO_CACHE)


@router.get("/v1/jobs/{job_id}/gpus", response_model=JobGpusOut, tags=["jobs"])
def gpus(job_id: str, rt: Runtime, who: User) -> JobGpusOut:
    """The recent readings (utilization, power) of every GPU the job holds now."""
    return job_gpus(rt, who, job_id)
