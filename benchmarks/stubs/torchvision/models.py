"""No pretrained models in the trial: any request fails the same way before and after."""


def __getattr__(name):
    raise ImportError(f"torchvision.models.{name} is not available in the trial stand-in")
