"""The AI4Privacy label vocabulary: the 200k label set and the other releases' names mapped
onto it. A leaf module: the config validates labels with it, the PII package builds on it."""

from __future__ import annotations

# The label set of ai4privacy/pii-masking-200k.
LABELS_200K = frozenset(
    """ACCOUNTNAME ACCOUNTNUMBER AGE AMOUNT BIC BITCOINADDRESS BUILDINGNUMBER CITY COMPANYNAME
    COUNTY CREDITCARDCVV CREDITCARDISSUER CREDITCARDNUMBER CURRENCY CURRENCYCODE CURRENCYNAME
    CURRENCYSYMBOL DATE DOB EMAIL ETHEREUMADDRESS EYECOLOR FIRSTNAME GENDER HEIGHT IBAN IP IPV4
    IPV6 JOBAREA JOBTITLE JOBTYPE LASTNAME LITECOINADDRESS MAC MASKEDNUMBER MIDDLENAME
    NEARBYGPSCOORDINATE ORDINALDIRECTION PASSWORD PHONEIMEI PHONENUMBER PIN PREFIX
    SECONDARYADDRESS SEX SSN STATE STREET TIME URL USERAGENT USERNAME VEHICLEVIN VEHICLEVRM
    ZIPCODE""".split()
)

# Labels of the 300k/400k/500k sets mapped onto the 200k names (the rest are kept as they are).
LABEL_ALIASES = {
    "GIVENNAME": "FIRSTNAME",
    "GIVENNAME1": "FIRSTNAME",
    "SURNAME": "LASTNAME",
    "LASTNAME1": "LASTNAME",
    "TELEPHONENUM": "PHONENUMBER",
    "TEL": "PHONENUMBER",
    "EMAILADDRESS": "EMAIL",
    "CREDITCARD": "CREDITCARDNUMBER",
    "SOCIALNUM": "SSN",
    "IDCARDNUM": "SSN",
    "ZIPCODE": "ZIPCODE",
    "POSTCODE": "ZIPCODE",
    "BUILDINGNUM": "BUILDINGNUMBER",
    "USERNAME": "USERNAME",
    "ACCOUNTNUM": "ACCOUNTNUMBER",
    "DATEOFBIRTH": "DOB",
    "BOD": "DOB",
    "IPADDRESS": "IP",
}


def canonical_label(label: str) -> str:
    """The 200k name of a label from any AI4Privacy release (unknown labels pass through)."""
    upper = label.strip().upper()
    return LABEL_ALIASES.get(upper, upper)
